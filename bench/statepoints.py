"""A precise stack: every call that may collect an LLVM statepoint, and a minor collection that moves
what the stack maps point to, against chapter 10b's conservative scan.

    python bench/statepoints.py [--repeat 5] [--only NAME ...] [--json bench/statepoints.json]
    python bench/statepoints.py --check [--stress] [NAME ...] [FILE.l ...]   # small sizes: the same outputs?
    python bench/statepoints.py --compile-time [--repeat 3] [--json bench/statepoints.json]

The runtime of chapter 10b scans the stack conservatively: any word that may
point into the nursery pins the block it points into. The alternative is a
stack map: for each call at which a collection may happen, where the caller
keeps each value that may point to the heap, so that the collector can move
the block and write the new address back. LLVM makes stack maps from
`gc.statepoint` calls: the call, wrapped, with the values live after it in a
"gc-live" bundle; after it, `gc.relocate` gives each value's new address,
which the code must use from then on. LLVM then keeps those values in stack
slots across the call and describes the slots in a section `.llvm_stackmaps`.

This script builds L's programs that way, beside chapters 10 and 10b without
changing them (it replaces the back end's class and the runtime's folder in
the process that compiles).

The compiler's half:

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
  merged with φ-nodes after it. The slow path stores the address of its
  return address in `lc_sp_ra`, where the runtime's walk starts.
* A call of a function from which no collection can start (it allocates
  nothing and calls, in tail position or not, only such functions: a least
  fixed point over the module, `quiet_functions`) stays a plain call: `fib`,
  `tak`, `ack` get no stack map at all, and LLVM may still inline them.
* Chapter 10 gives `fastcc` functions `no_callee_saved_registers`. LLVM lowers
  a statepoint as a call of the function it wraps, but takes the registers
  the call preserves from its calling convention alone, so a caller would
  keep values in registers the callee clobbers (it did: wrong output). This
  build gives the attribute up on the functions that may collect, which is
  part of what a precise stack costs.
* Each part's stack maps get a label, `lc_stackmaps_K`, for the runtime.

The runtime's half (PRECISE_C, added to a copy of gc.c): a minor collection
started from the slow path walks the L frames from `lc_sp_ra` -- a return
address names a call site, whose record lists the slots that hold heap
values and the frame's size, above which lies the caller's return address
-- and forwards each slot's block as it forwards a field: copied, the slot
rewritten. Nothing on the stack is pinned. The walk checks that no L return
address lies above where it stopped. Major collections still mark from a
conservative scan, which finds everything the maps list and more.

`--check` is the test of the live sets: a value a statepoint should have
listed and did not keeps its old address after the block moved, and the
program reads a dead copy. With `--stress` (the smallest nursery) the
programs collect often; the timed comparison checks the outputs at full size.

A flattened tuple (chapter 10's Fields) that must be allocated in the
middle of a term -- an argument of a jump, a field of a block -- is bound to
its block from then on, so that later allocations relocate it; and a value
the term read before an allocation moved it is looked up again (`latest`)
where the term stores or passes it. The operands of other primitives are
not: a pointer compared by address after a nested tuple was allocated in
the same primitive would be stale (no primitive of L's does that). The flag
lowering of exceptions is used (a trap's landing cannot receive relocated
values); `lc_alloc_old`'s calls and the initialisers' are not statepoints
(a collection from `lc_alloc_old` falls back to the conservative scan).
The stack maps' sizes include the runtime's 16-byte end marker.
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

    class Work(list):
        """Chapter 10's chain appends (block, term) for each continuation it gives a block; here each
        goes on with the scope of the continuation's body as well (StatepointBackend.continuation)."""

        def __init__(self, backend):
            super().__init__()
            self.backend = backend

        def append(self, item):
            super().append((*item, self.backend.continuation(*item)))

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
            b.assume(b.icmp_unsigned("!=", hp, word(0)))   # so that the caller's test of 0 folds away
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
            self.relocated(keys, merged)
            ptr = b.inttoptr(block, I64.as_pointer())
            b.store(word(first), ptr)
            for i, v in enumerate(fields, 1):
                b.store(self.resolve(v), b.gep(ptr, [word(i)]))
            return block

        def relocated(self, keys, new):
            """The values of keys moved to new: in the scope (in place: chain holds it), and in
            `latest`, for the values of this chain read before the move and used after it."""
            for key, value in zip(keys, new):
                self.latest[id(self.get(key))] = value
            self.scope.update(self.rebound(self.scope, keys, new))

        def resolve(self, value):
            while id(value) in self.latest:
                value = self.latest[id(value)]
            return value

        def value(self, b, o, values):
            whole = type(values.get(o.var)) is Fields
            if whole:                 # allocated here: live after it is what the term around o uses
                node = o.enclosing
                self.term = node if isinstance(node, cps.Term) else node.enclosing
            result = super().value(b, o, values)
            if whole:                 # a flattened tuple, allocated: the block from now on, relocated too
                values[o.var] = result
            return result

        def slow_path(self):
            """lc_alloc_slow_saving(words), which tells the runtime where the L stack starts: the
            address of its own return address (lc_sp_ra), for as long as lc_alloc_slow runs."""
            if "lc_alloc_slow_saving" in self.module.globals:
                return self.module.globals["lc_alloc_slow_saving"]
            f = ir.Function(self.module, ir.FunctionType(I64, [I64]), "lc_alloc_slow_saving")
            f.linkage, f.calling_convention = "internal", "preserve_mostcc"
            f.attributes.add("noinline")
            f.attributes.add("cold")
            b = ir.IRBuilder(f.append_basic_block("entry"))
            start = ir.GlobalVariable(self.module, I64, "lc_sp_ra")     # the runtime's
            slot = b.call(self.intrinsic("llvm.addressofreturnaddress.p0", llvm_backend.I8P, []), [])
            b.store(b.ptrtoint(slot, I64), start)
            block = b.call(self.rt["lc_alloc_slow"], [f.args[0]])
            b.store(word(0), start)
            b.ret(block)
            return f

        def declare(self):
            super().declare()
            self.lowering, self.traps = "flag", False     # a trap's landing cannot take relocated values
            self.live_marker = ir.Function(self.module, ir.FunctionType(VOID, [], var_arg=True), LIVE)
            self.reloc_marker = ir.Function(self.module, ir.FunctionType(I64, [I64]), RELOC)
            self.extras, self.scope = {}, {}

        def compile(self):
            module = super().compile()
            QUIET.clear()
            QUIET.update(f.name for f in quiet_functions(module))
            for f in self.functions.values():
                if f.name not in QUIET:
                    # LLVM lowers a statepoint as a call of the function it wraps, but takes the
                    # registers that call preserves from the calling convention alone: a callee that
                    # saves none (chapter 10's fastcc functions) would clobber what its caller keeps
                    # in them. A function that never collects is called without a statepoint.
                    set.discard(f.attributes, '"no_callee_saved_registers"')
            return module

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
            work = Work(self)
            list.append(work, (start, term, values))
            while work:
                block, t, scope = work.pop()
                self.scope, self.latest = scope, {}
                self.chain(f, ir.IRBuilder(block), t, scope, blocks, work, ret)
            if llvm_backend.LOCAL_HEAP_POINTER:
                llvm_backend.keep_heap_pointer(f, self.rt["lc_hp"], self.module.globals.get("lc_alloc"))
                llvm_backend.tell_apart(f, self.allocator_words(), self.alias_tags())

        def continuation(self, handler, term) -> dict:
            """The scope of a continuation's body, when chapter 10's chain has made its block: the
            heap values the body uses arrive as extra phi-nodes, after the parameters'."""
            t = term.enclosing                              # the LetCont whose handler term is
            blocks, _ = self.here
            _, phis = blocks[t.cont]
            keys = self.keys(t.handler, t.params, self.scope)
            extra = [ir.IRBuilder(handler).phi(I64, f"{self.name(var)}.live") for var, _ in keys]
            blocks[t.cont] = (handler, phis + extra)
            self.extras[t.cont] = keys
            return self.rebound(self.scope, keys, extra)     # (the parameters are in it already)

        def prim(self, b, p, values):
            self.term = p.enclosing                         # the LetPrim: what is live at an allocation in it
            return super().prim(b, p, values)

        def goto(self, b, k, args, blocks):
            args = [self.resolve(a) for a in args]      # an argument read before a later one was allocated
            super().goto(b, k, args + [self.get(key) for key in self.extras.get(k, ())], blocks)

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

    def object_code(text, level, executable, part=0, parts=1):
        # a label at the start of this part's stack maps, for the runtime (PRECISE_C)
        label = "\n".join(['.pushsection .llvm_stackmaps,"a",@progbits', f".globl lc_stackmaps_{part}",
                           f"lc_stackmaps_{part}:", ".popsection"])
        return original_object_code(statepoints(text) + f"\nmodule asm {llvm_backend.asm_string(label)}\n",
                                    level, executable, part, parts)

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

    from lcompiler import runtime as c_runtime
    folder = patched_runtime(Path(tempfile.mkdtemp(prefix="lc-statepoints-")))
    c_runtime.runtime_folder = lambda: folder
    llvm_backend.Backend = StatepointBackend
    llvm_backend.QUIET_CALLEES += (LIVE, RELOC)   # no reload of the heap pointer between marker and call
    driver.object_code = object_code
    llvm_backend.call_site_table = call_site_table


# --- the runtime's half: a minor collection that moves what the stack maps point to -----

PRECISE_C = r"""
/* --- A precise stack (bench/statepoints.py) ------------------------------
 * The slow path of allocation stores in lc_sp_ra the address of the word
 * that holds its return address into L code.  From there the collector
 * walks the L frames: each return address names a call site of a stack
 * map, which lists the slots (offsets from the stack pointer of the frame
 * at the call) that hold heap values, and the frame's size, above which
 * lies the return address into the caller.  A minor collection moves the
 * young blocks those slots point to, and writes the new addresses back;
 * nothing on the stack pins anything. */
uint64_t lc_sp_ra;
#define PART(k) extern const unsigned char lc_stackmaps_##k[] __attribute__((weak));
PART(0) PART(1) PART(2) PART(3) PART(4) PART(5) PART(6) PART(7)
__attribute__((section(".llvm_stackmaps"), used)) static const uint64_t lc_stackmaps_end[2];

struct sp_site { uint64_t ra, frame; uint32_t first, count; };
static struct sp_site *sp_sites;
static size_t sp_nsites, sp_room, sp_noffsets, sp_offroom;
static int32_t *sp_offsets;
static uint64_t sp_frames, sp_slots, sp_walks;

static uint64_t rd(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    memcpy(&v, p, (size_t)bytes);
    return v;
}

static void sp_fail(const char *what)
{
    fprintf(stderr, "precise stack: %s\n", what);
    abort();
}

static const unsigned char *align8(const unsigned char *p, const unsigned char *base)
{
    return base + ((size_t)(p - base) + 7) / 8 * 8;
}

static void sp_parse(const unsigned char *p)
{
    if (p == NULL || p[0] != 3) return;
    uint64_t nf = rd(p + 4, 4), nc = rd(p + 8, 4);
    const unsigned char *f = p + 16, *r = f + 24 * nf + 8 * nc;
    for (uint64_t i = 0; i < nf; i++) {
        uint64_t address = rd(f + 24 * i, 8), size = rd(f + 24 * i + 8, 8), count = rd(f + 24 * i + 16, 8);
        for (uint64_t j = 0; j < count; j++) {
            uint64_t offset = rd(r + 8, 4), n = rd(r + 14, 2);
            if (sp_nsites == sp_room) {
                sp_room = sp_room ? 2 * sp_room : 256;
                sp_sites = realloc(sp_sites, sp_room * sizeof *sp_sites);
            }
            struct sp_site *s = &sp_sites[sp_nsites++];
            s->ra = address + offset, s->frame = size, s->first = (uint32_t)sp_noffsets;
            const unsigned char *loc = r + 16;
            for (uint64_t k = 3; k < n; k += 2) {          /* after 3 constants: (base, derived) pairs */
                const unsigned char *l = loc + 12 * k;
                if (l[0] == 3) {                           /* Indirect: [register + offset] */
                    if (rd(l + 4, 2) != 7) sp_fail("a slot not addressed from rsp");
                    if (sp_noffsets == sp_offroom) {
                        sp_offroom = sp_offroom ? 2 * sp_offroom : 1024;
                        sp_offsets = realloc(sp_offsets, sp_offroom * sizeof *sp_offsets);
                    }
                    sp_offsets[sp_noffsets++] = (int32_t)rd(l + 8, 4);
                } else if (l[0] == 1 || l[0] == 2) {
                    sp_fail("a heap value in a register, or an address");
                }                                          /* 4, 5: a constant, no pointer */
            }
            s->count = (uint32_t)(sp_noffsets - s->first);
            const unsigned char *q = align8(loc + 12 * n, p);
            r = align8(q + 4 + 4 * rd(q + 2, 2), p);
        }
    }
}

static int sp_by_ra(const void *a, const void *b)
{
    const struct sp_site *x = a, *y = b;
    return x->ra < y->ra ? -1 : x->ra > y->ra;
}

static struct sp_site *sp_find(uint64_t ra)
{
    struct sp_site key = {ra, 0, 0, 0};
    return sp_nsites ? bsearch(&key, sp_sites, sp_nsites, sizeof key, sp_by_ra) : NULL;
}

static void sp_report(void)
{
    if (getenv("LC_SP_STATS"))
        fprintf(stderr, "precise stack: %zu call sites; %llu walks, %llu frames, %llu slots\n", sp_nsites,
                (unsigned long long)sp_walks, (unsigned long long)sp_frames, (unsigned long long)sp_slots);
}

static uint64_t precise_stack(void)
{
    if (sp_sites == NULL) {
        const unsigned char *parts[] = {lc_stackmaps_0, lc_stackmaps_1, lc_stackmaps_2, lc_stackmaps_3,
                                        lc_stackmaps_4, lc_stackmaps_5, lc_stackmaps_6, lc_stackmaps_7};
        for (int k = 0; k < 8; k++) sp_parse(parts[k]);
        if (sp_nsites == 0) sp_fail("no stack maps");
        qsort(sp_sites, sp_nsites, sizeof *sp_sites, sp_by_ra);
        atexit(sp_report);
    }
    sp_walks++;
    uint64_t *slot = (uint64_t *)lc_sp_ra;
    struct sp_site *s;
    while ((s = sp_find(*slot)) != NULL) {
        char *sp = (char *)(slot + 1);
        for (uint32_t i = 0; i < s->count; i++) forward((uint64_t *)(sp + sp_offsets[s->first + i]));
        sp_frames++, sp_slots += s->count;
        slot = (uint64_t *)(sp + s->frame);
    }
    /* The walk ends at a return address into code without stack maps (lc_program, the runtime).
     * No word above it may be one of L's return addresses: else a frame size was wrong. */
    for (const uint64_t *p = slot + 1; p < (const uint64_t *)stack_top; p++)
        if (sp_find(*p) != NULL) sp_fail("the walk lost its way: an L return address above its end");
    return (stack_top - (uintptr_t)lc_sp_ra) / 8;
}

"""


def patched_runtime(folder: Path) -> Path:
    """A copy of chapter 10b's runtime in folder, whose minor collections walk the stack maps instead of
    pinning what the stack points to (while the slow path has set lc_sp_ra, which it always does)."""
    from lcompiler import runtime as c_runtime
    folder.mkdir(parents=True, exist_ok=True)
    for source in c_runtime.runtime_sources():
        text = source.read_text()
        if source.name == "gc.c":
            scan = "    uint64_t stack_words = scan_thread_stack(true);\n"
            collection = "static __attribute__((noinline)) void minor_collection(void)\n"
            if scan not in text or collection not in text:
                raise RuntimeError("chapter 10b's minor_collection changed: bench/statepoints.py must follow")
            text = text.replace(scan, "    uint64_t stack_words = lc_sp_ra ? precise_stack() : scan_thread_stack(true);\n")
            text = text.replace(collection, PRECISE_C + collection)
        (folder / source.name).write_text(text)
    return folder


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
        if callee.lstrip("@").strip('"') in QUIET:   # no collection can start in it: a plain call,
            out.append(lines[i + 1])                 # and each "relocated" value is the value itself
            i += 2
            left = len(values)
            while left:
                reloc = MARK_RELOC.match(lines[i])
                if reloc is None:
                    out.append(lines[i])
                else:
                    out.append(f"{reloc.group(1)}{reloc.group(2)} = add i64 {values[int(reloc.group(3))]}, 0")
                    left -= 1
                i += 1
            continue
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


QUIET = set()          # the module's functions that never collect: their calls need no statepoint
COLLECTING = ("lc_alloc", "lc_alloc_old", "lc_alloc_slow", "lc_alloc_slow_saving")


def quiet_functions(module) -> set:
    """The functions of a module (llvmlite.ir) from which no collection can start: they call neither
    the allocator nor, in tail position or not, a function that may, nor a closure (unknown)."""
    from llvmlite import ir
    defined = [f for f in module.functions if f.blocks]
    calls = {f: [ins for block in f.blocks for ins in block.instructions if isinstance(ins, ir.CallInstr)]
             for f in defined}
    collecting = set()
    changed = True
    while changed:                      # until no function is found to collect: a least fixed point
        changed = False
        for f in defined:
            if f in collecting:
                continue
            for call in calls[f]:
                callee = call.callee
                if not isinstance(callee, ir.Function) or callee.name in COLLECTING or callee in collecting:
                    collecting.add(f)
                    changed = True
                    break
    return {f for f in defined if f not in collecting}


# --- measuring ---------------------------------------------------------

SETUP = """\
sys.path.insert(0, {bench!r})
import statepoints
statepoints.install()
"""


def sections(exe: str) -> dict:
    """An executable's sections (ELF, 64-bit, little-endian): {name: (address, contents, entry size)}."""
    data = Path(exe).read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    found = {}
    for name, _, _, address, offset, size, _, _, _, entry in headers:
        label = data[names + name:data.index(b"\0", names + name)].decode()
        found[label] = (address, data[offset:offset + size], entry)
    return found


def section_sizes(exe: str) -> dict:
    """The sizes in bytes of an executable's sections .text and .llvm_stackmaps."""
    return {name: len(s[1]) for name, s in sections(exe).items() if name in (".text", ".llvm_stackmaps")}


def symbols(exe: str) -> dict:
    """The functions of an executable's symbol table: {address: name}."""
    found = sections(exe)
    _, table, entry = found[".symtab"]
    strings = found[".strtab"][1]
    named = {}
    for at in range(0, len(table), entry):
        name, info, _, _, value, _ = struct.unpack_from("<IBBHQQ", table, at)
        if info & 0xF == 2:                           # STT_FUNC
            named[value] = strings[name:strings.index(b"\0", name)].decode()
    return named


def sizes(name, cmds) -> dict:
    """bench/builds.py's extra record of a benchmark: the sections of both executables, and the
    collector's statistics of one more run of each (LC_GC_STATS: pinned blocks, promoted MB, ...)."""
    import os

    import gc_share                          # bench/gc_share.py: the runtime's statistics, parsed
    record = {"sections": {lang: section_sizes(cmd[0]) for lang, cmd in cmds.items()}, "gc": {}}
    for lang, cmd in cmds.items():
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, LC_GC_STATS="1", LC_SP_STATS="1"))
        record["gc"][lang] = gc_share.parse(done.stderr)
        walks = re.search(r"precise stack: (\d+) call sites; (\d+) walks, (\d+) frames, (\d+) slots", done.stderr)
        if walks:
            record["gc"][lang].update(zip(("call_sites", "walks", "frames", "slots"), map(int, walks.groups())))
    return record


def check(names: list, files: list, stress: bool = False) -> int:
    """Build each benchmark (at its small size) and each file both ways; their outputs must agree.
    With stress, both run with the smallest nursery (one chunk of 64 KB), so that the statepoint
    build collects, and moves what its stack maps point to, many times in every program that allocates."""
    import os
    env = dict(os.environ, LC_NURSERY="65536", LC_SP_STATS="1") if stress else None
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
                try:
                    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env=env)
                except subprocess.TimeoutExpired:           # a dead copy's address can loop for ever
                    done = subprocess.CompletedProcess(exe, None, "", "did not stop within 60 s")
                walks = re.findall(r"^precise stack: .*$", done.stderr, re.M)
                outputs[p, way] = (done.returncode, done.stdout, re.sub(r"^precise stack: .*\n", "", done.stderr,
                                                                      flags=re.M))
                if way == "statepoints":
                    same = outputs[p, way] == outputs[p, "lc build"]
                    stack_map = section_sizes(exe).get(".llvm_stackmaps", 0)
                    print(f"{p.stem:14} {'same output' if same else 'DIFFERENT OUTPUT'}, "
                          f"{stack_map:,} bytes of stack maps" + (f"; {walks[0][15:]}" if walks else ""), flush=True)
        return 0 if all(outputs[p, "statepoints"] == outputs[p, "lc build"] for p in programs) else 1


# One child process per build and round: it builds every benchmark twice and times the second
# build (the first pays for LLVM's start), printing {name: seconds} as JSON.
TIME_BUILDS = """\
import json, sys, tempfile, time
from pathlib import Path
from lcompiler import driver
from lcompiler.errors import Source
{setup}
times = {{}}
with tempfile.TemporaryDirectory() as tmp:
    for src in sys.argv[1:]:
        source = Source(src, open(src).read())
        for _ in range(2):
            start = time.perf_counter()
            driver.build(source, Path(tmp) / "a.out")
            times[Path(src).stem] = time.perf_counter() - start
print(json.dumps(times))
"""


def compile_time(argv) -> int:
    """Time lc build and the statepoint build of every benchmark (at run.py's small size: the size is
    the constant n, the program the same), in alternation:
    each round one child process per build; the median over the rounds, and their paired ratio. With
    --json FILE, add the figures to FILE (bench/statepoints.json, written by the timing) as "compile"."""
    import json
    import statistics

    import run
    from builds import arguments
    args, names = arguments(__doc__, 3, [a for a in argv if a != "--compile-time"])
    setups = {"lc build": "", "statepoints": SETUP.format(bench=str(Path(__file__).resolve().parent))}
    rounds = {way: [] for way in setups}
    with tempfile.TemporaryDirectory() as tmp:
        sources = [str(run.LANGUAGES["L"].source(n, run.SIZES[n][1], Path(tmp))) for n in names]
        for _ in range(args.repeat):
            for way, setup in setups.items():
                done = subprocess.run([sys.executable, "-c", TIME_BUILDS.format(setup=setup), *sources],
                                      capture_output=True, text=True, check=True)
                rounds[way].append(json.loads(done.stdout))
    record = {}
    for name in names:
        times = {way: [r[name] for r in rs] for way, rs in rounds.items()}
        record[name] = {way: statistics.median(t) for way, t in times.items()}
        record[name]["ratio"] = statistics.median(a / b for a, b in zip(times["lc build"], times["statepoints"]))
        print(f"{name:14} lc build {record[name]['lc build']:.3f} s, statepoints {record[name]['statepoints']:.3f} s,"
              f" ratio {record[name]['ratio']:.2f}", flush=True)
    total = {way: sum(r[way] for r in record.values()) for way in setups}
    print(f"{'all':14} lc build {total['lc build']:.2f} s, statepoints {total['statepoints']:.2f} s")
    if args.json:
        results = json.loads(Path(args.json).read_text())
        results["compile"] = {"command": "python bench/statepoints.py " + " ".join(argv),
                              "repeat": args.repeat, "benchmarks": record, "total": total}
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--compile-time" in argv:
        return compile_time(argv)
    if "--check" in argv:
        import run
        rest = [a for a in argv if a not in ("--check", "--stress")]
        names = [a for a in rest if not a.endswith(".l")] or [n for n in run.SIZES if (run.PROGRAMS / f"{n}.l").exists()]
        return check(names, [a for a in rest if a.endswith(".l")], "--stress" in argv)
    from builds import OtherBuild, compare
    other = OtherBuild("L-statepoints", SETUP.format(bench=str(Path(__file__).resolve().parent)),
                       "every call that may collect a statepoint")
    return compare("statepoints.py", __doc__, other, "lc build / statepoints", argv, extra=sizes)


if __name__ == "__main__":
    sys.exit(main())
