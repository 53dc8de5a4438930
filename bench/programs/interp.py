N = 100000
# interp: an interpreter for a small imperative language, whose expressions
# (ten kinds) and statements (five) are dataclasses, matched with `match`,
# run on a program of that language that counts and sums the primes below
# N by trial division. The interpreted program's six variables are
# numbered; its environment is a list of six ints, updated in place. (A
# while statement is a Python loop: CPython's stack is too small for the
# recursion the other versions use.)
from dataclasses import dataclass


@dataclass(frozen=True)
class Lit:
    value: int


@dataclass(frozen=True)
class Var:
    k: int


@dataclass(frozen=True)
class Add:
    a: object
    b: object


@dataclass(frozen=True)
class Sub:
    a: object
    b: object


@dataclass(frozen=True)
class Mul:
    a: object
    b: object


@dataclass(frozen=True)
class Mod:
    a: object
    b: object


@dataclass(frozen=True)
class Less:
    a: object
    b: object


@dataclass(frozen=True)
class Equal:
    a: object
    b: object


@dataclass(frozen=True)
class And:
    a: object
    b: object


@dataclass(frozen=True)
class Not:
    a: object


@dataclass(frozen=True)
class Assign:
    k: int
    e: object


@dataclass(frozen=True)
class Seq:
    a: object
    b: object


@dataclass(frozen=True)
class If:
    c: object
    a: object
    b: object


@dataclass(frozen=True)
class While:
    c: object
    body: object


@dataclass(frozen=True)
class Skip:
    pass


def evaluate(e, env):
    match e:
        case Lit(v):
            return v
        case Var(k):
            return env[k]
        case Add(a, b):
            return evaluate(a, env) + evaluate(b, env)
        case Sub(a, b):
            return evaluate(a, env) - evaluate(b, env)
        case Mul(a, b):
            return evaluate(a, env) * evaluate(b, env)
        case Mod(a, b):
            return evaluate(a, env) % evaluate(b, env)     # operands are never negative here
        case Less(a, b):
            return 1 if evaluate(a, env) < evaluate(b, env) else 0
        case Equal(a, b):
            return 1 if evaluate(a, env) == evaluate(b, env) else 0
        case And(a, b):
            return 0 if evaluate(a, env) == 0 else evaluate(b, env)
        case Not(a):
            return 1 if evaluate(a, env) == 0 else 0


def execute(s, env):
    match s:
        case Assign(k, e):
            env[k] = evaluate(e, env)
        case Seq(a, b):
            execute(a, env)
            execute(b, env)
        case If(c, a, b):
            execute(a if evaluate(c, env) != 0 else b, env)
        case While(c, body):
            while evaluate(c, env) != 0:
                execute(body, env)
        case Skip():
            pass


# The variables of the interpreted program.
LIMIT, I, J, PRIME, COUNT, SUM = range(6)

# count := 0; sum := 0; i := 2
# while (i < limit) {
#   j := 2; prime := 1
#   while (prime && !(i < j * j)) { if (i % j == 0) prime := 0; j := j + 1 }
#   if (prime) { count := count + 1; sum := sum + i }
#   i := i + 1
# }
PROGRAM = \
    Seq(Assign(COUNT, Lit(0)), Seq(Assign(SUM, Lit(0)), Seq(Assign(I, Lit(2)),
        While(Less(Var(I), Var(LIMIT)),
              Seq(Assign(J, Lit(2)), Seq(Assign(PRIME, Lit(1)),
                  Seq(While(And(Var(PRIME), Not(Less(Var(I), Mul(Var(J), Var(J))))),
                            Seq(If(Equal(Mod(Var(I), Var(J)), Lit(0)), Assign(PRIME, Lit(0)), Skip()),
                                Assign(J, Add(Var(J), Lit(1))))),
                      Seq(If(Var(PRIME), Seq(Assign(COUNT, Add(Var(COUNT), Lit(1))),
                                             Assign(SUM, Add(Var(SUM), Var(I)))), Skip()),
                          Assign(I, Add(Var(I), Lit(1)))))))))))

env = [N, 0, 0, 0, 0, 0]
execute(PROGRAM, env)
print(env[COUNT], env[SUM])
