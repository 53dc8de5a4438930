"""A precise stack, on the compiler's side: every call that may collect becomes an LLVM statepoint.

    python bench/statepoints.py [--repeat 5] [--only NAME ...] [--json bench/statepoints.json]
    python bench/statepoints.py --check [NAME ...] [FILE.l ...]   # small sizes: the same outputs?

The runtime of chapter 10b scans the stack conservatively: any word that may
point into the nursery pins the block it points into. The alternative is a
stack map: for each call at which a collection may happen, where the caller
keeps each value that may point to the heap, so that the collector can move
the block and write the new address back. LLVM makes stack maps from
`gc.statepoint` calls: the call, wrapped, with the values live after it in a
"gc-live" bundle; after it, `gc.relocate` gives each value's new address,
which the code must use from then on. LLVM then keeps those values in stack
slots across the call and describes the slots in a section `.llvm_stackmaps`.

This script is the compiler's half of that design, built beside chapter 10's
back end without changing it:

* In CPS the values live after a call are the free variables of its return
  continuation (and of its handler). Every continuation that has a block
  receives the heap values it uses as extra phi-nodes, so that a value
  relocated on one path into it is the one its body uses.
  What a body uses includes what the continuations it jumps to use: a loop
  that exits to a continuation keeps that continuation's values alive
  across every call in it (the first version of this script forgot, and
  LLVM, seeing a relocation no later call needed, moved it past them).
* Every call that is not a tail call becomes a statepoint whose gc-live
  values are those of its continuations, which then receive the relocated
  values. (A tail call leaves no frame behind: nothing to describe.)
* Allocation's slow path, where a collection starts, is a statepoint too:
  `lc_alloc` keeps only the bump (it returns 0 when the nursery is full) and
  each allocation site calls the slow path itself, with the values live
  after the allocation -- its fields and what the rest of the term uses --
  merged with φ-nodes after it.
* Chapter 10 gives `fastcc` functions `no_callee_saved_registers`. LLVM lowers
  a statepoint as a call of the function it wraps, but takes the registers
  the call preserves from its calling convention alone, so a caller would
  keep values in registers the callee clobbers (it did: wrong output). This
  build gives the attribute up, which is part of what a precise stack costs.

Flagged, not done: an argument list that materialises a flattened tuple
after another argument was read uses that argument's value from before the
allocation; a moving collector would need it relocated too. The flag
lowering of exceptions is used (a trap's landing cannot receive relocated
values); `lc_alloc_old`'s calls and the initialisers' are not statepoints.

The runtime is unchanged: it still scans the stack conservatively, which
finds the slots LLVM spilled the gc-live values to, pins their blocks, and so
never moves them -- each relocation gives back the same address. That is what
lets these executables run, and be timed against `lc build`'s: the measure is
what a precise stack costs the mutator (spills and reloads, calls LLVM can no
longer inline, the lost freedom to keep a value in a register), and how big
its stack maps are. What it would save the collector is measured apart
(chapter 10b's pinned blocks and scanned stack).
"""
import itertools
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

STRATEGY = 'gc "statepoint-example"'
DECLARATIONS = """
declare token @llvm.experimental.gc.statepoint.p0(i64 immarg, i32 immarg, ptr, i32 immarg, i32 immarg, ...)
declare ptr addrspace(1) @llvm.experimental.gc.relocate.p1(token, i32 immarg, i32 immarg)
declare i64 @llvm.experimental.gc.result.i64(token)
"""
LIVE, RELOC = "lc.sp.live", "lc.sp.reloc"     # markers the back end writes, rewritten as statepoints


def install():
    """Make the compiler of this process write statepoints (see the module's docstring)."""
    from llvmlite import ir

    from lcompiler import cps, driver, llvm_backend
    from lcompiler.llvm_backend import I64, VOID, Fields, may_point, word

    class StatepointBackend(llvm_backend.Backend):
        def allocator(self):
            """lc_alloc(words, heap) without its slow path: 0 when the nursery is full (its caller
            calls the slow path, as a statepoint with its own live values)."""
            if "lc_alloc" in self.module.globals:
                return self.module.globals["lc_alloc"]
            f = ir.Function(self.module, ir.FunctionType(I64, [I64, I64.as_pointer()]), "lc_alloc")
            f.linkage = "internal"
            f.attributes.add("alwaysinline")
            b = ir.IRBuilder(f.append_basic_block("entry"))
            words, heap = f.args
            hp = b.load(heap, "hp")
            new = b.add(hp, b.mul(words, word(llvm_backend.WORD)), "new")
            with b.if_then(b.icmp_unsigned(">", new, b.load(self.rt["lc_hl"], "hl")), likely=False):
                b.ret(word(0))
            b.store(new, heap)
            b.store(new, self.rt["lc_hp"])
            b.ret(hp)
            if llvm_backend.LOCAL_HEAP_POINTER:
                llvm_backend.tell_apart(f, self.allocator_words() | {heap}, self.alias_tags())
            return f

        def alloc(self, b, fields, types, tag=0, code=False):
            first = llvm_backend.header(types, tag, code=code)
            if first & llvm_backend.OLD:
                return super().alloc(b, fields, types, tag, code)
            words = word(len(fields) + 1)
            p = b.call(self.allocator(), [words, self.rt["lc_hp"]])
            fast, slow = b.block, b.function.append_basic_block("full")
            merge = b.function.append_basic_block("allocated")
            b.cbranch(b.icmp_unsigned("==", p, word(0)), slow, merge)
            # the slow path: a collection may happen, so it is a statepoint, with every value live
            # after the allocation (the fields to be stored, and what the rest of the term uses)
            b.position_at_end(slow)
            keys = self.keys(self.term, (), self.scope)
            b.call(self.live_marker, [self.get(key) for key in keys])
            q = b.call(self.slow_path(), [words], cconv="preserve_mostcc")
            relocated = [b.call(self.reloc_marker, [word(i)]) for i in range(len(keys))]
            b.branch(merge)
            b.position_at_end(merge)
            block = b.phi(I64, "block")
            block.add_incoming(p, fast)
            block.add_incoming(q, slow)
            merged = []
            for key, r in zip(keys, relocated):
                phi = b.phi(I64)
                phi.add_incoming(self.get(key), fast)
                phi.add_incoming(r, slow)
                merged.append(phi)
            renamed = {id(self.get(key)): m for key, m in zip(keys, merged)}
            self.scope.update(self.rebound(self.scope, keys, merged))    # in place: chain holds it
            ptr = b.inttoptr(block, I64.as_pointer())
            b.store(word(first), ptr)
            for i, v in enumerate(fields, 1):
                b.store(renamed.get(id(v), v), b.gep(ptr, [word(i)]))
            return block

        def declare(self):
            super().declare()
            self.lowering, self.traps = "flag", False     # a trap's landing cannot take relocated values
            for f in self.functions.values():
                # LLVM lowers a statepoint as a call of the function it wraps, but takes the registers
                # that call preserves from the calling convention alone: a callee that saves none
                # (chapter 10's fastcc functions) would clobber the values its caller keeps in them.
                set.discard(f.attributes, '"no_callee_saved_registers"')
            self.live_marker = ir.Function(self.module, ir.FunctionType(VOID, [], var_arg=True), LIVE)
            self.reloc_marker = ir.Function(self.module, ir.FunctionType(I64, [I64]), RELOC)
            self.extras, self.scope = {}, {}

        # --- the heap values a continuation's body uses, as keys into a scope ---
        def keys(self, term, params, scope) -> list:
            """(var, None) for each variable free in term (but params) bound in scope to a value of
            the code that may point to the heap; (var, i) for such a component of a flattened tuple;
            and those of each continuation term jumps to (whose body runs after term's)."""
            bound = set(params)
            out = []
            for v in cps.free_variables(term):
                if v.is_cont:                          # a jump to an enclosing continuation: what
                    out += self.extras.get(v, ())      # its body uses is live here too
                    continue
                if v in bound or v not in scope:
                    continue
                value = scope[v]
                if type(value) is Fields:
                    out += [(v, i) for i, (c, t) in enumerate(zip(value, v.type.args))
                            if may_point(t) and isinstance(c, (ir.Instruction, ir.Argument))]
                elif may_point(v.type) and isinstance(value, (ir.Instruction, ir.Argument)):
                    out.append((v, None))
            return list(dict.fromkeys(out))

        def get(self, key, scope=None):
            var, i = key
            value = (self.scope if scope is None else scope)[var]
            return value if i is None else value[i]

        @staticmethod
        def rebound(scope, keys, new) -> dict:
            out = dict(scope)
            for (var, i), value in zip(keys, new):
                if i is None:
                    out[var] = value
                else:
                    parts = Fields(out[var])
                    parts[i] = value
                    out[var] = parts
            return out

        # --- terms, with a scope per continuation ---
        def body(self, f, term, values, ret, params=(), me=None):
            blocks = {}
            start = f.append_basic_block("entry")
            if self.catching:
                self.frame_trap(f, start, term)
            args = list(f.args)
            if me is not None:
                start, args = self.recur(f, start, args, blocks, me)
            self.parameters(params, args, values)
            self.here = (blocks, ret)
            work = [(start, term, values)]
            while work:
                block, t, scope = work.pop()
                self.scope = scope
                self.chain(f, ir.IRBuilder(block), t, scope, blocks, work, ret)
            if llvm_backend.LOCAL_HEAP_POINTER:
                llvm_backend.keep_heap_pointer(f, self.rt["lc_hp"], self.module.globals.get("lc_alloc"))
                llvm_backend.tell_apart(f, self.allocator_words(), self.alias_tags())

        def chain(self, f, b, t, values, blocks, work, ret):
            while True:
                if type(t) is cps.LetPrim and self.virtual(t.var, t.prim):
                    values[t.var] = Fields([self.value(b, o, values) for o in t.prim.fields])
                    t = t.body
                elif type(t) is cps.LetPrim:
                    if self.debug is not None:
                        self.debug.place(b, t)
                    self.term = t                      # what is live at an allocation in it
                    v = self.prim(b, t.prim, values)
                    values[t.var] = v
                    if t.var.count and not isinstance(v, ir.Constant) and not v.name:
                        v.name = self.name(t.var)
                    t = t.body
                elif type(t) is cps.LetCont:
                    if t.cont.count:
                        handler = f.append_basic_block(self.name(t.cont))
                        hb = ir.IRBuilder(handler)
                        phis = [hb.phi(I64, self.name(x)) for x in t.params]
                        keys = self.keys(t.handler, t.params, values)
                        extra = [hb.phi(I64, f"{self.name(var)}.live") for var, _ in keys]
                        scope = self.rebound(values, keys, extra)
                        scope.update(zip(t.params, phis))
                        blocks[t.cont] = (handler, phis + extra)
                        self.extras[t.cont] = keys
                        work.append((handler, t.handler, scope))
                    t = t.body
                else:
                    if self.debug is not None:
                        self.debug.place(b, t)
                    self.term = t
                    self.jump(b, t, values, blocks, ret)
                    return

        def goto(self, b, k, args, blocks):
            super().goto(b, k, list(args) + [self.get(key) for key in self.extras.get(k, ())], blocks)

        def case(self, b, t, values, blocks):
            super().case(b, t, values, blocks)
            targets = [k.var for _, k in t.arms] + ([t.default.var] if t.default is not None else [])
            if sorted(n for n, _ in t.arms) == [0, 1] and t.default is None:
                targets = [k.var for _, k in t.arms]          # a conditional branch: two edges
            for k in targets:
                _, phis = blocks[k]
                for phi, key in zip(phis, self.extras.get(k, ())):
                    phi.add_incoming(self.get(key), b.block)

        def call(self, b, t, values, blocks, ret):
            args = [w for o in t.args for w in self.words(b, o, values)]
            tail = t.cont.var is ret and t.exn.var is ret.binder.exn
            if t.kind == "direct" and tail and t.func.var in blocks:
                self.goto(b, t.func.var, args, blocks)
                return
            if t.kind == "direct":
                callee = self.functions[t.func.var]
            else:
                record = self.value(b, t.func, values)
                code = b.load(self.field(b, record, 0), "code")
                fty = ir.FunctionType(I64, [I64] * (len(args) + 1))
                callee, args = b.inttoptr(code, fty.as_pointer()), [record] + args
            cc = callee.calling_convention if t.kind == "direct" else "tailcc"
            if tail:
                result = b.call(callee, args, cconv=cc, tail=cc == "tailcc")
                self.locate(result, t.loc, site=False)
                b.ret(result)
                return
            keys = list(dict.fromkeys([*self.extras.get(t.cont.var, ()), *self.extras.get(t.exn.var, ())]))
            b.call(self.live_marker, [self.get(key) for key in keys])
            result = b.call(callee, args, cconv=cc)
            self.locate(result, t.loc, site=True)
            relocated = [b.call(self.reloc_marker, [word(i)]) for i in range(len(keys))]
            self.scope = self.rebound(self.scope, keys, relocated)
            if self.catching:
                self.test_flag(b, t, blocks, ret)
            if t.cont.var is ret:
                b.ret(result)
            else:
                self.goto(b, t.cont.var, [result], blocks)

    original_object_code = driver.object_code

    def object_code(text, *args, **kwargs):
        return original_object_code(statepoints(text), *args, **kwargs)

    def call_site_table(module, part=0, parts=1):
        """Chapter 10's call_site_table, but for the one condition: a statepoint is a call site
        (chapter 10's leaves out every call of an intrinsic of LLVM's)."""
        lb = llvm_backend
        lb.llvm.initialize_native_asmparser()
        text = str(module)
        sites = lb.call_sites(text)

        def labelled(m):
            indent, call, node, rest = m.groups()
            n = sites.get(node)
            intrinsic = "@llvm." in call and "@llvm.experimental.gc.statepoint" not in call
            intrinsic = intrinsic or "lc_alloc_slow_saving" in call      # the runtime, wrapped
            if n is None or intrinsic or (lb.TAIL_CALL.search(call) and text.startswith(" ret", m.end() + 1)) \
                    or lb.calls_runtime(call):
                return m.group(0)
            before = lb.asm_string(f"771: # call site {n}")
            after = lb.asm_string(f"772:\n.pushsection {lb.SITE_SECTION}\n.quad 771b, 772b, {n}\n.popsection")
            return (f"{indent}call void asm sideeffect {before}, \"\"()\n{indent}{call}, !dbg {node}{rest}\n"
                    f"{indent}call void asm sideeffect {after}, \"\"()")

        name = lb.SITE_TABLE.format(part)
        following = lb.SITE_TABLE.format(part + 1) if part + 1 < parts else "0"
        head = "\n".join([f".pushsection {lb.SITE_SECTION}", ".p2align 3", f".globl {name}", f"{name}:",
                          f".quad lc_sites.end, {following}", ".popsection"])
        empty = re.compile(rf'^@"?{re.escape(lb.SITE_TABLE.format(0))}"? = (weak|external) global .*$', re.M)
        text = empty.sub(f'@"{lb.SITE_TABLE.format(0)}" = external global [2 x i64]', text)
        return lb.addlang.load(lb.CALL.sub(labelled, text)
                               + '\n@"lc_sites.end" = internal global i64 0, section "lc_sites"\n'
                               + f"module asm {lb.asm_string(head)}\n")

    llvm_backend.Backend = StatepointBackend
    llvm_backend.QUIET_CALLEES += (LIVE, RELOC)   # no reload of the heap pointer between marker and call
    driver.object_code = object_code
    llvm_backend.call_site_table = call_site_table


# --- the text: markers into statepoints ----------------------------------

MARK_LIVE = re.compile(rf'^\s*call void \(\.\.\.\) @"?{re.escape(LIVE)}"?\((.*)\)\s*$')
MARK_RELOC = re.compile(rf'^(\s*)(%\S+) = call i64 @"?{re.escape(RELOC)}"?\(i64 (\d+)\)\s*$')
CALL = re.compile(r'^(\s*)(%\S+) = call (fastcc |tailcc |preserve_mostcc |)i64 (@"[^"]+"|@[\w.$]+|%"[^"]+"|%[\w.$]+)\(')


def split_arguments(text: str) -> tuple[list, str]:
    """The arguments of a call, from just after its '(' : ([argument, ...], the rest after ')')."""
    depth, start, out = 0, 0, []
    for i, c in enumerate(text):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            if depth == 0:
                if text[start:i].strip():
                    out.append(text[start:i].strip())
                return out, text[i + 1:]
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    raise ValueError(f"no end to the arguments: {text!r}")


def statepoints(text: str) -> str:
    """Rewrite each marked call: live marker, call, relocation markers -> statepoint, result, relocations."""
    if LIVE not in text:
        return text
    lines, out, ids = text.split("\n"), [], itertools.count()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("declare") and (LIVE in line or RELOC in line):
            i += 1
            continue
        if line.startswith("define "):
            at = line.find(" !dbg ")
            line = (line[:at] + f" {STRATEGY}" + line[at:] if at >= 0
                    else re.sub(r"(\s*\{?\s*)$", lambda m: f" {STRATEGY}{m.group(1)}", line, count=1))
        live = MARK_LIVE.match(line)
        if not live:
            out.append(line)
            i += 1
            continue
        values = [a.split(" ", 1)[1] for a in split_arguments(live.group(1) + ")")[0]]
        call = CALL.match(lines[i + 1])
        if not call:
            raise ValueError(f"a live marker not before a call: {lines[i + 1]!r}")
        indent, result, cc, callee = call.groups()
        args, rest = split_arguments(lines[i + 1][call.end():])
        n = next(ids)
        token = f'%"sp.{n}"'
        for j, v in enumerate(values):
            out.append(f'{indent}%"sp.{n}.p{j}" = inttoptr i64 {v} to ptr addrspace(1)')
        bundle = ", ".join(f'ptr addrspace(1) %"sp.{n}.p{j}"' for j in range(len(values)))
        signature = f"i64 ({', '.join(a.split(' ', 1)[0] for a in args)})"
        out.append(f"{indent}{token} = call {cc}token (i64, i32, ptr, i32, i32, ...) "
                   f"@llvm.experimental.gc.statepoint.p0(i64 {n}, i32 0, ptr elementtype({signature}) {callee}, "
                   f"i32 {len(args)}, i32 0{''.join(', ' + a for a in args)}, i32 0, i32 0)"
                   + f' ["gc-live"({bundle})]{rest}')
        out.append(f"{indent}{result} = call i64 @llvm.experimental.gc.result.i64(token {token})")
        i += 2
        left = len(values)               # its relocations follow, among what else the back end put there
        while left:
            reloc = MARK_RELOC.match(lines[i])
            if reloc is None:
                out.append(lines[i])
            else:
                _, name, j = reloc.groups()
                out.append(f'{indent}%"sp.{n}.q{j}" = call ptr addrspace(1) '
                           f"@llvm.experimental.gc.relocate.p1(token {token}, i32 {j}, i32 {j})")
                out.append(f'{indent}{name} = ptrtoint ptr addrspace(1) %"sp.{n}.q{j}" to i64')
                left -= 1
            i += 1
    return "\n".join(out) + DECLARATIONS


# --- measuring ---------------------------------------------------------

SETUP = """\
sys.path.insert(0, {bench!r})
import statepoints
statepoints.install()
"""


def section_sizes(exe: str) -> dict:
    """The sizes in bytes of an executable's sections .text and .llvm_stackmaps (ELF, 64-bit, little-endian)."""
    data = Path(exe).read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    sizes = {}
    for name, _, _, _, _, size in headers:
        label = data[names + name:data.index(b"\0", names + name)].decode()
        if label in (".text", ".llvm_stackmaps"):
            sizes[label] = size
    return sizes


def sizes(name, cmds) -> dict:
    """bench/builds.py's extra record of a benchmark: the sections of both executables."""
    return {"sections": {lang: section_sizes(cmd[0]) for lang, cmd in cmds.items()}}


def check(names: list, files: list) -> int:
    """Build each benchmark (at its small size) and each file both ways; their outputs must agree."""
    import run
    from lcompiler import driver
    from lcompiler.errors import Source
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        programs = [run.LANGUAGES["L"].source(n, run.SIZES[n][1], tmp) for n in names] + [Path(f) for f in files]
        outputs = {}
        for way in ("lc build", "statepoints"):
            if way == "statepoints":
                install()
            for p in programs:
                exe = tmp / f"{p.stem}.{way.replace(' ', '-')}"
                driver.build(Source(str(p), p.read_text()), exe)
                done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
                outputs[p, way] = (done.returncode, done.stdout, done.stderr)
                if way == "statepoints":
                    same = outputs[p, way] == outputs[p, "lc build"]
                    stack_map = section_sizes(exe).get(".llvm_stackmaps", 0)
                    print(f"{p.stem:14} {'same output' if same else 'DIFFERENT OUTPUT'}, "
                          f"{stack_map:,} bytes of stack maps", flush=True)
        return 0 if all(outputs[p, "statepoints"] == outputs[p, "lc build"] for p in programs) else 1


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--check" in argv:
        import run
        rest = [a for a in argv if a != "--check"]
        names = [a for a in rest if not a.endswith(".l")] or [n for n in run.SIZES if (run.PROGRAMS / f"{n}.l").exists()]
        return check(names, [a for a in rest if a.endswith(".l")])
    from builds import OtherBuild, compare
    other = OtherBuild("L-statepoints", SETUP.format(bench=str(Path(__file__).resolve().parent)),
                       "every call that may collect a statepoint")
    return compare("statepoints.py", __doc__, other, "lc build / statepoints", argv, extra=sizes)


if __name__ == "__main__":
    sys.exit(main())
