// Context switch for arm64, AAPCS64.
//
// ccoro_switch(ccoro_context *from /* x0 */, const ccoro_context *to /* x1 */)
// saves x19-x30, d8-d15 and FPCR in a 176-byte frame on the current stack:
//
//   sp+0   x19 x20     sp+16  x21 x22     sp+32  x23 x24     sp+48  x25 x26
//   sp+64  x27 x28     sp+80  x29 x30     sp+96  d8 d9       sp+112 d10 d11
//   sp+128 d12 d13     sp+144 d14 d15     sp+160 FPCR, pad
//
// stores sp in from->sp, loads to->sp, restores the same layout and returns to x30.
// ccoro_make lays out that frame with x19 = entry, x20 = arg, x30 = ccoro_trampoline.
#if defined(__aarch64__)

#if defined(__APPLE__)
#define SYM(x) _##x
#define TYPE(x)
#define SIZE(x)
#else
#define SYM(x) x
#define TYPE(x) .type x, %function
#define SIZE(x) .size x, .-x
#endif

// Reserves the frame and stores the callee-saved registers in it.
.macro CCORO_SAVE_REGISTERS
    sub sp, sp, #176
    .cfi_adjust_cfa_offset 176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    .cfi_rel_offset x19, 0
    .cfi_rel_offset x20, 8
    .cfi_rel_offset x21, 16
    .cfi_rel_offset x22, 24
    .cfi_rel_offset x23, 32
    .cfi_rel_offset x24, 40
    .cfi_rel_offset x25, 48
    .cfi_rel_offset x26, 56
    .cfi_rel_offset x27, 64
    .cfi_rel_offset x28, 72
    .cfi_rel_offset x29, 80
    .cfi_rel_offset x30, 88
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    .cfi_rel_offset d8, 96
    .cfi_rel_offset d9, 104
    .cfi_rel_offset d10, 112
    .cfi_rel_offset d11, 120
    .cfi_rel_offset d12, 128
    .cfi_rel_offset d13, 136
    .cfi_rel_offset d14, 144
    .cfi_rel_offset d15, 152
.endm

// Stores FPCR in its slot of the frame.
.macro CCORO_SAVE_CONTROL
    mrs x9, fpcr
    str x9, [sp, #160]
.endm

// Once sp is the target's: loads its FPCR.
.macro CCORO_LOAD_CONTROL
    ldr x9, [sp, #160]
    msr fpcr, x9
.endm

// Once sp is the target's: loads the callee-saved registers (the frame is the target's, laid out
// identically, so the CFI of CCORO_SAVE_REGISTERS still holds).
.macro CCORO_LOAD_REGISTERS
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    // The registers hold their values again: an unwinder stopped at the `add` or the `ret` (a
    // signal there) must not read them from the frame being popped.
    .cfi_restore x19
    .cfi_restore x20
    .cfi_restore x21
    .cfi_restore x22
    .cfi_restore x23
    .cfi_restore x24
    .cfi_restore x25
    .cfi_restore x26
    .cfi_restore x27
    .cfi_restore x28
    .cfi_restore x29
    .cfi_restore x30
    .cfi_restore d8
    .cfi_restore d9
    .cfi_restore d10
    .cfi_restore d11
    .cfi_restore d12
    .cfi_restore d13
    .cfi_restore d14
    .cfi_restore d15
.endm

    .text
    .globl SYM(ccoro_switch)
    .p2align 4
    TYPE(SYM(ccoro_switch))
SYM(ccoro_switch):
    .cfi_startproc
    CCORO_SAVE_REGISTERS
    CCORO_SAVE_CONTROL
    mov x9, sp
    str x9, [x0]
    ldr x9, [x1]
    mov sp, x9
    CCORO_LOAD_CONTROL
    CCORO_LOAD_REGISTERS
    add sp, sp, #176
    .cfi_adjust_cfa_offset -176
    ret
    .cfi_endproc
    SIZE(SYM(ccoro_switch))

// On arm64 `ret` is predicted from x30, which ccoro_switch loads from the target frame: there is
// no separate jump form to choose, so ccoro_switch_jump is the same switch.
    .globl SYM(ccoro_switch_jump)
    .p2align 4
    TYPE(SYM(ccoro_switch_jump))
SYM(ccoro_switch_jump):
    .cfi_startproc
    b SYM(ccoro_switch)
    .cfi_endproc
    SIZE(SYM(ccoro_switch_jump))

// ccoro_switch_swap(ccoro_context *ctx /* x0 */): ccoro_switch with one context for both sides
// (it loads the target's sp from ctx and stores its own there) and without FPCR, which a
// generator's consumer and body share (see context_x86_64.S).
    .globl SYM(ccoro_switch_swap)
    .p2align 4
    TYPE(SYM(ccoro_switch_swap))
SYM(ccoro_switch_swap):
    .cfi_startproc
    CCORO_SAVE_REGISTERS
    ldr x10, [x0]
    mov x9, sp
    str x9, [x0]
    mov sp, x10
    CCORO_LOAD_REGISTERS
    add sp, sp, #176
    .cfi_adjust_cfa_offset -176
    ret
    .cfi_endproc
    SIZE(SYM(ccoro_switch_swap))

// The first frame of every coroutine stack. Unwinders stop here: the return address is undefined.
    .globl SYM(ccoro_trampoline)
    .p2align 4
    TYPE(SYM(ccoro_trampoline))
SYM(ccoro_trampoline):
    .cfi_startproc
    .cfi_undefined x30
    mov x29, #0
    mov x0, x20
    blr x19
    brk #0
    .cfi_endproc
    SIZE(SYM(ccoro_trampoline))

// void ccoro_make(ccoro_context *ctx /* x0 */, void *stack_top /* x1 */,
//                 void (*entry)(void *) /* x2 */, void *arg /* x3 */)
    .globl SYM(ccoro_make)
    .p2align 4
    TYPE(SYM(ccoro_make))
SYM(ccoro_make):
    .cfi_startproc
    and x1, x1, #~15
    sub x9, x1, #192              // 176-byte switch frame + 16 bytes of zeros above it
    stp xzr, xzr, [x9, #176]
    mov x10, #0
1:  str xzr, [x9, x10]
    add x10, x10, #8
    cmp x10, #176
    b.lo 1b
    stp x2, x3, [x9, #0]          // x19 = entry, x20 = arg
    adr x10, SYM(ccoro_trampoline)
    str x10, [x9, #88]            // x30 = trampoline
    str x9, [x0]
    ret
    .cfi_endproc
    SIZE(SYM(ccoro_make))

#endif

#if defined(__ELF__)
    .section .note.GNU-stack,"",%progbits
#endif
