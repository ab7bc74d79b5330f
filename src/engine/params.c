/*
 * params.c — default request parameters (kept apart from the engine so that code which only
 * builds requests, such as the server's body parser and its fuzzer, needs no engine).
 */
#include <string.h>

#include "engine/engine.h"

ts_request_params ts_request_params_default(void) {
    ts_request_params p;
    memset(&p, 0, sizeof p);
    p.sampling = ts_sampler_params_default();
    p.n = 1;
    return p;
}
