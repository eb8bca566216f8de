/*
 * main_thread.c - see main_thread.h.
 */
#include "core/main_thread.h"

#include <pthread.h>

static pthread_t main_thread;
static int known = 0;

void MainThread_Init(void) {
    main_thread = pthread_self();
    known = 1;
}

int MainThread_Is(void) {
    return known && pthread_equal(pthread_self(), main_thread);
}
