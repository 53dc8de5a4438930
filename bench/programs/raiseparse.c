#define N 5500000
/* raiseparse: a parser of arithmetic expressions that fails on bad input.
   N inputs are generated from a seeded random sequence: expressions of
   digits, +, -, * and parentheses, as C strings in a buffer (written from
   its end backwards, as the L version builds its lists), in which about one
   digit in 12 is a '?'. The parser (expression, term, factor, by recursive
   descent over a pointer) evaluates each input modulo 10007. At the first
   unexpected character c it leaves by longjmp to the caller with c + 1 (0
   at an early end): setjmp/longjmp is the idiom C has for leaving a deep
   recursive descent at once, where the other versions raise an exception.
   The caller counts the good inputs and the bad.
   Allocation: none on the heap (no malloc). */
#include <setjmp.h>
#include <stdio.h>

static jmp_buf on_bad;
static const char *p;

static long next(long s) { return s * 48271 % 2147483647; }

/* Writes an expression of depth at most d before *end (moving *end back); returns the seed. */
static long gen(int d, long s, char **end) {
    long s1 = next(s);
    if (d == 0 || s1 % 3 == 0) {
        *--*end = s1 % 12 == 0 ? '?' : (char)('0' + s1 / 3 % 10);
        return s1;
    }
    if (s1 % 4 == 1) {
        *--*end = ')';
        long s2 = gen(d - 1, s1, end);
        *--*end = '(';
        return s2;
    }
    long s2 = gen(d - 1, s1, end);
    *--*end = s1 % 5 < 2 ? '+' : s1 % 5 < 4 ? '*' : '-';
    return gen(d - 1, s2, end);
}

static void bad(void) { longjmp(on_bad, *p ? *p + 1 : 0); }

static long expr(void);

static long factor(void) {
    char c = *p;
    if (c >= '0' && c <= '9') { p++; return c - '0'; }
    if (c == '(') {
        p++;
        long v = expr();
        if (*p != ')') bad();
        p++;
        return v;
    }
    bad();
    return 0;
}

static long term(void) {
    long v = factor();
    while (*p == '*') { p++; v = v * factor() % 10007; }
    return v;
}

static long expr(void) {
    long v = term();
    for (;;) {
        if (*p == '+') { p++; v = (v + term()) % 10007; }
        else if (*p == '-') { p++; v = (v - term() + 10007) % 10007; }
        else return v;
    }
}

int main(void) {
    static char buffer[4096];
    long good = 0, nbad = 0, sum = 0, s = 1;
    for (long i = 0; i < N; i++) {
        char *end = buffer + sizeof buffer - 1;
        *end = '\0';
        s = gen(6, s, &end);
        p = end;
        int code = setjmp(on_bad);
        if (code == 0) {
            long v = expr();
            if (*p) bad();
            good++;
            sum = (sum + v) % 1000003;
        } else {
            nbad++;
            sum = (sum + code) % 1000003;
        }
    }
    printf("%ld %ld %ld\n", good, nbad, sum);
    return 0;
}
