/*
 * dag_park.c - see dag_park.h.
 */
#include "engine/dag_park.h"

#include "core/run_gate.h"

int Dag_Parked(RAI_Dag *dag, long long now_ms, long long *wait_ms) {
    if (dag->next_op >= dag->nops) return 0;
    RAI_DagOp *op = &dag->ops[dag->next_op];
    const RAI_BackendDescriptor *be = NULL;
    void *handle = NULL;
    if (op->kind == DAG_OP_MODEL && op->model) {
        be = op->model->be;
        handle = op->model->handle;
    } else if (op->kind == DAG_OP_SCRIPT && op->script) {
        be = op->script->be;
        handle = op->script->handle;
    }
    if (be == NULL) return 0;
    long long since = dag->park_since_ms ? dag->park_since_ms : now_ms;
    long long at = RunGate_NotBefore(be, handle, since, now_ms);
    if (at == 0) return 0; /* Dag_RunFrom clears park_since_ms as the op starts */
    dag->park_since_ms = since;
    long long left = at > now_ms ? at - now_ms : 1;
    if (*wait_ms < 0 || left < *wait_ms) *wait_ms = left;
    return 1;
}
