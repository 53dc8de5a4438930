#define N 100000
/* interp: an interpreter for a small imperative language, whose
   expressions (ten kinds) and statements (five) are tagged structs, run on
   a program of that language that counts and sums the primes below N by
   trial division. The interpreted program's six variables are numbered;
   its environment is an array of six longs, updated in place. The program's
   tree is malloc'ed once and never freed; the interpreter allocates
   nothing. Dominated by the switch on the kinds and the recursion of eval. */
#include <stdio.h>
#include <stdlib.h>

typedef enum { LIT, VAR, ADD, SUB, MUL, MOD, LESS, EQUAL, AND, NOT } ExprKind;
typedef struct Expr Expr;
struct Expr { ExprKind kind; long value; const Expr *a, *b; };

typedef enum { ASSIGN, SEQ, IF, WHILE, SKIP } StmtKind;
typedef struct Stmt Stmt;
struct Stmt { StmtKind kind; long var; const Expr *e; const Stmt *a, *b; };

static const Expr *expr(ExprKind kind, long value, const Expr *a, const Expr *b) {
    Expr *e = malloc(sizeof *e);
    e->kind = kind; e->value = value; e->a = a; e->b = b;
    return e;
}
static const Expr *lit(long v) { return expr(LIT, v, NULL, NULL); }
static const Expr *var(long k) { return expr(VAR, k, NULL, NULL); }
static const Expr *binary(ExprKind kind, const Expr *a, const Expr *b) { return expr(kind, 0, a, b); }

static const Stmt *stmt(StmtKind kind, long var, const Expr *e, const Stmt *a, const Stmt *b) {
    Stmt *s = malloc(sizeof *s);
    s->kind = kind; s->var = var; s->e = e; s->a = a; s->b = b;
    return s;
}
static const Stmt *assign(long k, const Expr *e) { return stmt(ASSIGN, k, e, NULL, NULL); }
static const Stmt *seq(const Stmt *a, const Stmt *b) { return stmt(SEQ, 0, NULL, a, b); }

static long eval(const Expr *e, const long *env) {
    switch (e->kind) {
    case LIT: return e->value;
    case VAR: return env[e->value];
    case ADD: return eval(e->a, env) + eval(e->b, env);
    case SUB: return eval(e->a, env) - eval(e->b, env);
    case MUL: return eval(e->a, env) * eval(e->b, env);
    case MOD: { long a = eval(e->a, env); return a % eval(e->b, env); }
    case LESS: { long a = eval(e->a, env); return a < eval(e->b, env); }
    case EQUAL: { long a = eval(e->a, env); return a == eval(e->b, env); }
    case AND: return eval(e->a, env) == 0 ? 0 : eval(e->b, env);
    case NOT: return eval(e->a, env) == 0;
    }
    abort();
}

static void exec(const Stmt *s, long *env) {
    switch (s->kind) {
    case ASSIGN: env[s->var] = eval(s->e, env); return;
    case SEQ: exec(s->a, env); exec(s->b, env); return;
    case IF: if (eval(s->e, env)) exec(s->a, env); else exec(s->b, env); return;
    case WHILE: while (eval(s->e, env)) exec(s->a, env); return;
    case SKIP: return;
    }
}

/* The variables of the interpreted program. */
enum { LIMIT, I, J, PRIME, COUNT, SUM };

int main(void) {
    const Stmt *skip = stmt(SKIP, 0, NULL, NULL, NULL);
    /* count := 0; sum := 0; i := 2
       while (i < limit) {
         j := 2; prime := 1
         while (prime && !(i < j * j)) { if (i % j == 0) prime := 0; j := j + 1 }
         if (prime) { count := count + 1; sum := sum + i }
         i := i + 1
       } */
    const Stmt *program =
        seq(assign(COUNT, lit(0)), seq(assign(SUM, lit(0)), seq(assign(I, lit(2)),
          stmt(WHILE, 0, binary(LESS, var(I), var(LIMIT)),
            seq(assign(J, lit(2)), seq(assign(PRIME, lit(1)),
            seq(stmt(WHILE, 0, binary(AND, var(PRIME), expr(NOT, 0, binary(LESS, var(I), binary(MUL, var(J), var(J))), NULL)),
                  seq(stmt(IF, 0, binary(EQUAL, binary(MOD, var(I), var(J)), lit(0)), assign(PRIME, lit(0)), skip),
                      assign(J, binary(ADD, var(J), lit(1)))), NULL),
            seq(stmt(IF, 0, var(PRIME), seq(assign(COUNT, binary(ADD, var(COUNT), lit(1))),
                                            assign(SUM, binary(ADD, var(SUM), var(I)))), skip),
                assign(I, binary(ADD, var(I), lit(1))))))), NULL))));
    long env[6] = {N, 0, 0, 0, 0, 0};
    exec(program, env);
    printf("%ld %ld\n", env[COUNT], env[SUM]);
    return 0;
}
