N = 5500000
# raiseparse: a parser of arithmetic expressions that raises on bad input.
# N inputs are generated from a seeded random sequence: expressions of
# digits, +, -, * and parentheses, as strings, in which about one digit in
# 12 is a '?'. The parser (expression, term, factor, by recursive descent
# over an index into the string) evaluates each input modulo 10007 or raises
# Bad(c + 1) at the first unexpected character c (Bad(0) at an early end);
# the caller counts the good inputs and the bad.


class Bad(Exception):
    pass


def nxt(s):
    return s * 48271 % 2147483647


def gen(d, s, rest):
    """(seed, the characters of an expression of depth at most d, then rest): built right to left."""
    s1 = nxt(s)
    if d == 0 or s1 % 3 == 0:
        rest.append(63 if s1 % 12 == 0 else 48 + s1 // 3 % 10)
        return s1
    if s1 % 4 == 1:
        rest.append(41)
        s2 = gen(d - 1, s1, rest)
        rest.append(40)
        return s2
    s2 = gen(d - 1, s1, rest)
    rest.append(43 if s1 % 5 < 2 else 42 if s1 % 5 < 4 else 45)
    return gen(d - 1, s2, rest)


class Parser:
    def __init__(self, text):
        self.text = text
        self.i = 0

    def bad(self):
        raise Bad(ord(self.text[self.i]) + 1 if self.i < len(self.text) else 0)

    def peek(self):
        return self.text[self.i] if self.i < len(self.text) else ""

    def factor(self):
        c = self.peek()
        if "0" <= c <= "9" and c:
            self.i += 1
            return ord(c) - 48
        if c == "(":
            self.i += 1
            v = self.expr()
            if self.peek() != ")":
                self.bad()
            self.i += 1
            return v
        self.bad()

    def term(self):
        v = self.factor()
        while self.peek() == "*":
            self.i += 1
            v = v * self.factor() % 10007
        return v

    def expr(self):
        v = self.term()
        while True:
            c = self.peek()
            if c == "+":
                self.i += 1
                v = (v + self.term()) % 10007
            elif c == "-":
                self.i += 1
                v = (v - self.term() + 10007) % 10007
            else:
                return v

    def parse(self):
        v = self.expr()
        if self.i != len(self.text):
            self.bad()
        return v


good = nbad = total = 0
s = 1
for _ in range(N):
    chars = []
    s = gen(6, s, chars)
    text = "".join(map(chr, reversed(chars)))
    try:
        v = Parser(text).parse()
        good += 1
        total = (total + v) % 1000003
    except Bad as e:
        nbad += 1
        total = (total + e.args[0]) % 1000003
print(good, nbad, total)
