/* Calls the C ABI of the model `mlp` (graphs/mlp.tgc) as a C program would:
 * loads its weights, runs it at B = 4 and B = 3, compares each output with a plain C computation of
 * relu(x·w1 + b1)·w2 + b2, and checks that bad calls fail with the right
 * status and a message. Prints "ok" and exits 0, else says what failed and
 * exits 1. Built and run by tests/c_abi.rs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tgc_kernels.h"

static int failures = 0;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "mlp.c:%d: ", __LINE__);                      \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                        \
            failures++;                                                   \
        }                                                                 \
    } while (0)

/* Deterministic values in [-1, 1). */
static void fill(float* v, int n, unsigned seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
}

static float w1[16 * 32], b1[32], w2[32 * 8], b2[8];

static void reference(const float* x, float* y, int b) {
    for (int r = 0; r < b; r++) {
        float h[32];
        for (int j = 0; j < 32; j++) {
            double acc = b1[j];
            for (int k = 0; k < 16; k++) acc += (double)x[r * 16 + k] * w1[k * 32 + j];
            h[j] = acc > 0 ? (float)acc : 0.0f;
        }
        for (int j = 0; j < 8; j++) {
            double acc = b2[j];
            for (int k = 0; k < 32; k++) acc += (double)h[k] * w2[k * 8 + j];
            y[r * 8 + j] = (float)acc;
        }
    }
}

static void run_and_compare(const tgc_mlp_model* m, int b) {
    float x[4 * 16], y[4 * 8], want[4 * 8];
    fill(x, b * 16, 100u + (unsigned)b);
    int32_t s = tgc_mlp_model_run(m, x, b * 16, y, b * 8, b);
    CHECK(s == TGC_OK, "run at B = %d: status %d: %s", b, s, tgc_mlp_last_error());
    reference(x, want, b);
    for (int i = 0; i < b * 8; i++) {
        CHECK(fabsf(y[i] - want[i]) <= 1e-4f + 1e-4f * fabsf(want[i]), "B = %d, y[%d] = %g, want %g", b, i,
              y[i], want[i]);
    }
}

int main(void) {
    fill(w1, 16 * 32, 1);
    fill(b1, 32, 2);
    fill(w2, 32 * 8, 3);
    fill(b2, 8, 4);
    tgc_weight weights[4] = {
        {"w1", w1, sizeof w1},
        {"b1", b1, sizeof b1},
        {"w2", w2, sizeof w2},
        {"b2", b2, sizeof b2},
    };
    tgc_mlp_model* m = NULL;

    /* A missing weight, a wrong size and an unknown name are refused. */
    int32_t s = tgc_mlp_model_init(weights, 3, &m);
    CHECK(s == TGC_FORMAT && m == NULL, "3 weights: status %d", s);
    CHECK(strstr(tgc_mlp_last_error(), "`b2`") != NULL, "message: %s", tgc_mlp_last_error());
    weights[1].bytes -= 4;
    s = tgc_mlp_model_init(weights, 4, &m);
    CHECK(s == TGC_SHAPE_MISMATCH && m == NULL, "short b1: status %d", s);
    weights[1].bytes += 4;
    weights[3].name = "b3";
    s = tgc_mlp_model_init(weights, 4, &m);
    CHECK(s == TGC_INVALID_ARGUMENT && strstr(tgc_mlp_last_error(), "b3") != NULL, "b3: status %d: %s", s,
          tgc_mlp_last_error());
    weights[3].name = "b2";

    s = tgc_mlp_model_init(weights, 4, &m);
    CHECK(s == TGC_OK && m != NULL, "init: status %d: %s", s, tgc_mlp_last_error());
    if (m == NULL) return 1;
    /* The model copied the weights: changing ours changes nothing. */
    float saved = w1[0];
    w1[0] = 1000.0f;
    float x[4 * 16], y1[4 * 8], y2[4 * 8];
    fill(x, 4 * 16, 104u);
    tgc_mlp_model_run(m, x, 4 * 16, y1, 4 * 8, 4);
    w1[0] = saved;
    run_and_compare(m, 4);
    run_and_compare(m, 3);
    tgc_mlp_model_run(m, x, 4 * 16, y2, 4 * 8, 4);
    CHECK(memcmp(y1, y2, sizeof y1) == 0, "the model read the caller's weights after init");

    /* Bad runs fail with a status and write nothing. */
    float y[4 * 8];
    for (int i = 0; i < 4 * 8; i++) y[i] = -7.0f;
    s = tgc_mlp_model_run(m, x, 4 * 16 - 1, y, 4 * 8, 4);
    CHECK(s == TGC_LENGTH_MISMATCH && y[0] == -7.0f, "short x: status %d", s);
    s = tgc_mlp_model_run(m, x, 4 * 16, y, 4 * 8, 0);
    CHECK(s == TGC_INVALID_DIM, "B = 0: status %d: %s", s, tgc_mlp_last_error());
    s = tgc_mlp_model_run(m, x, 4 * 16, x, 4 * 8, 4);
    CHECK(s == TGC_INVALID_ARGUMENT && strstr(tgc_mlp_last_error(), "overlaps") != NULL, "y aliases x: %d: %s",
          s, tgc_mlp_last_error());
    s = tgc_mlp_model_run(NULL, x, 4 * 16, y, 4 * 8, 4);
    CHECK(s == TGC_INVALID_ARGUMENT, "null model: status %d", s);
    s = tgc_mlp_model_run(m, NULL, 4 * 16, y, 4 * 8, 4);
    CHECK(s == TGC_INVALID_ARGUMENT, "null x: status %d", s);
    s = tgc_mlp_model_run(m, (const float*)((const char*)x + 1), 4 * 16 - 1, y, 4 * 8, 4);
    CHECK(s == TGC_MISALIGNED, "misaligned x: status %d", s);
    s = tgc_mlp_model_init(weights, 4, NULL);
    CHECK(s == TGC_INVALID_ARGUMENT, "null out: status %d", s);

    tgc_mlp_model_free(m);
    tgc_mlp_model_free(NULL);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
