#define N 2000
/* hof: closure calls through higher-order functions. Each round makes
   five closures that capture the round's numbers (an adder, a scaler, a
   polynomial, a composition of two closures, and one that applies a
   closure twice), then folds over the numbers 1 .. 1000 with a function
   that applies every closure of an array to each number. Nearly every call
   is an indirect call through a closure.
   A closure is a struct: a code pointer and the captured variables. The
   closures of a round live in the round's stack frame (no malloc): their
   lifetime is the round's, which is how a C programmer would write it. */
#include <stdio.h>

#define P 1000003

typedef struct Fn Fn;   /* a closure from long to long */
struct Fn { long (*code)(const Fn *self, long x); long a, b; const Fn *f, *g; };

typedef struct Fn2 Fn2; /* a closure from (long, long) to long */
struct Fn2 { long (*code)(const Fn2 *self, long acc, long x); const Fn *fs; long count; };

static long fold_range(long a, long b, long acc, const Fn2 *f) {
    for (long x = a; x <= b; x++) acc = f->code(f, acc, x);
    return acc;
}

static long apply_all(const Fn *fs, long count, long x, long acc) {
    for (long k = 0; k < count; k++) acc = (acc + fs[k].code(&fs[k], x)) % P;
    return acc;
}

static long compose_code(const Fn *self, long x) { return self->f->code(self->f, self->g->code(self->g, x)); }
static long adder_code(const Fn *self, long x) { return x + self->a; }
static long scaler_code(const Fn *self, long x) { return x * self->a; }
static long poly_code(const Fn *self, long x) { return (x * x + self->a * x + self->b) % P; }
static long twice_code(const Fn *self, long x) { return self->f->code(self->f, self->f->code(self->f, x)); }

static long step_code(const Fn2 *self, long acc, long x) { return (acc * 31 + apply_all(self->fs, self->count, x, 0)) % P; }

static long round_(long i) {
    Fn add1 = {adder_code, 1, 0, NULL, NULL}, times3 = {scaler_code, 3, 0, NULL, NULL};
    Fn add_i11 = {adder_code, i % 11, 0, NULL, NULL};
    Fn fs[5] = {
        {adder_code, i, 0, NULL, NULL},
        {scaler_code, i % 7 + 1, 0, NULL, NULL},
        {poly_code, i % 5, i % 3, NULL, NULL},
        {compose_code, 0, 0, &add1, &times3},
        {twice_code, 0, 0, &add_i11, NULL},
    };
    Fn2 step = {step_code, fs, 5};
    return fold_range(1, 1000, i, &step);
}

int main(void) {
    long total = 0;
    for (long i = 0; i < N; i++) total = (total + round_(i)) % P;
    long r0 = round_(0), r1 = round_(1);
    printf("%ld %ld %ld\n", r0, r1, total);
    return 0;
}
