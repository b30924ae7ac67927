// Context switch for x86_64, System V ABI.
//
// ccoro_switch(ccoro_context *from /* rdi */, const ccoro_context *to /* rsi */)
// pushes the callee-saved registers (rbp, rbx, r12-r15), MXCSR and the x87 control word onto
// the current stack, stores rsp in from->sp, loads to->sp, pops the same layout (MXCSR only when
// its control bits differ, the x87 control word only when it differs: see the macro) and returns
// to (ccoro_switch) or jumps to (ccoro_switch_jump) the popped return address:
//
//   sp+0   MXCSR (4 bytes) | x87 control word (2 bytes) | pad
//   sp+8   r15
//   sp+16  r14
//   sp+24  r13
//   sp+32  r12
//   sp+40  rbx
//   sp+48  rbp
//   sp+56  return address
//
// ccoro_make lays out that frame on a fresh stack with r12 = entry, r13 = arg and the return
// address = ccoro_trampoline, which calls entry(arg) with a 16-byte aligned stack.
// ccoro_switch_swap (below) uses the same layout without saving or loading the control word.
#if defined(__x86_64__)

#if defined(__APPLE__)
#define SYM(x) _##x
#define TYPE(x)
#define SIZE(x)
#else
#define SYM(x) x
#define TYPE(x) .type x, @function
#define SIZE(x) .size x, .-x
#endif

// Pushes the callee-saved registers and reserves the control-register word (sp+0).
.macro CCORO_SAVE_REGISTERS
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbp, 0
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbx, 0
    pushq %r12
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r12, 0
    pushq %r13
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r13, 0
    pushq %r14
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r14, 0
    pushq %r15
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r15, 0
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
.endm

// Stores this side's MXCSR and x87 control word in the word at sp+0 and keeps them in eax and
// edx (both caller-saved) for CCORO_LOAD_CONTROL.
.macro CCORO_SAVE_CONTROL
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movl (%rsp), %eax
    movzwl 4(%rsp), %edx
.endm

// Once rsp is the target's: loads the target's control registers where they differ from this
// side's (eax, edx from CCORO_SAVE_CONTROL).
.macro CCORO_LOAD_CONTROL
    // MXCSR: only its control bits (6-15) are callee-saved; bits 0-5 are sticky exception flags
    // (caller-saved). ldmxcsr of a value that differs from the current one costs about 50 ns on
    // Intel Xeon (measured: Scripts/compare-boost.sh), and the flags differ between two contexts
    // as soon as one of them has rounded a floating-point result. So it is loaded only when the
    // target's control bits differ from this side's, and the flags carry over.
    movl (%rsp), %ecx
    xorl %eax, %ecx
    testl $0xFFC0, %ecx
    jz 1f
    ldmxcsr (%rsp)
1:
    // The x87 control word has no sticky bits: it is loaded only when it differs. fldcw took
    // about a tenth of a switch's samples on Intel Xeon when it ran every time (perf annotate of
    // the generator benchmark).
    cmpw 4(%rsp), %dx
    je 2f
    fldcw 4(%rsp)
2:
.endm

// Once rsp is the target's: pops the layout CCORO_SAVE_REGISTERS pushed, up to the return
// address. The frame is the target's, laid out identically, so the CFI of CCORO_SAVE_REGISTERS
// still holds.
.macro CCORO_LOAD_REGISTERS
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %r15
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r15
    popq %r14
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r14
    popq %r13
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r13
    popq %r12
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r12
    popq %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    popq %rbp
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbp
.endm

// ccoro_switch returns with `ret`. When both sides of a switch suspended at the same call site
// (two coroutines switching through the scheduler, the common case), the return-stack predictor
// guesses the target right and stays in step with the calls and returns around the switch.
    .text
    .globl SYM(ccoro_switch)
    .p2align 4
    TYPE(SYM(ccoro_switch))
SYM(ccoro_switch):
    .cfi_startproc
    CCORO_SAVE_REGISTERS
    CCORO_SAVE_CONTROL
    movq %rsp, (%rdi)
    movq (%rsi), %rsp
    CCORO_LOAD_CONTROL
    CCORO_LOAD_REGISTERS
    ret
    .cfi_endproc
    SIZE(SYM(ccoro_switch))

// ccoro_switch_jump ends with an indirect jump instead: for switches whose two sides are at
// different call sites (into a fresh stack's trampoline, between a generator's next() and its
// yield), where `ret` would miss the return-stack prediction on every switch. The branch target
// buffer predicts the jump instead. r8 is caller-saved, so callers expect it clobbered.
    .globl SYM(ccoro_switch_jump)
    .p2align 4
    TYPE(SYM(ccoro_switch_jump))
SYM(ccoro_switch_jump):
    .cfi_startproc
    CCORO_SAVE_REGISTERS
    CCORO_SAVE_CONTROL
    movq %rsp, (%rdi)
    movq (%rsi), %rsp
    CCORO_LOAD_CONTROL
    CCORO_LOAD_REGISTERS
    popq %r8
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %r8
    jmp *%r8
    .cfi_endproc
    SIZE(SYM(ccoro_switch_jump))

// ccoro_switch_swap(ccoro_context *ctx /* rdi */): the switch between a generator's consumer and
// its body, two stacks that only ever switch to each other (the runtime never resumes a context
// saved here through ccoro_switch or ccoro_switch_jump, nor the reverse, except a fresh stack laid
// out by ccoro_make). Two differences from ccoro_switch_jump:
// - One context for both sides: it loads the target's rsp from ctx and stores its own there, so
//   the word holds whichever side is switched out, and each side needs just the one address,
//   already in a register: no load stands between the registers a switch restores and the
//   address the next switch reads.
// - MXCSR and the x87 control word are neither saved nor loaded (their word in the frame is left
//   as it is): the body runs inside the consumer's next(), so the two share the floating-point
//   environment as a function shares its caller's (the Generators article). stmxcsr and fnstcw took
//   about two fifths of this switch's samples on Intel Xeon (perf annotate of the generator
//   benchmark).
    .globl SYM(ccoro_switch_swap)
    .p2align 4
    TYPE(SYM(ccoro_switch_swap))
SYM(ccoro_switch_swap):
    .cfi_startproc
    CCORO_SAVE_REGISTERS
    movq (%rdi), %rsi
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    CCORO_LOAD_REGISTERS
    popq %r8
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %r8
    jmp *%r8
    .cfi_endproc
    SIZE(SYM(ccoro_switch_swap))

// The first frame of every coroutine stack. Unwinders stop here: the return address is undefined.
    .globl SYM(ccoro_trampoline)
    .p2align 4
    TYPE(SYM(ccoro_trampoline))
SYM(ccoro_trampoline):
    .cfi_startproc
    .cfi_undefined %rip
    movq %r13, %rdi
    callq *%r12
    ud2
    .cfi_endproc
    SIZE(SYM(ccoro_trampoline))

// void ccoro_make(ccoro_context *ctx /* rdi */, void *stack_top /* rsi */,
//                 void (*entry)(void *) /* rdx */, void *arg /* rcx */)
    .globl SYM(ccoro_make)
    .p2align 4
    TYPE(SYM(ccoro_make))
SYM(ccoro_make):
    .cfi_startproc
    andq $-16, %rsi
    leaq -80(%rsi), %rax          // 64-byte switch frame + 16 bytes so the trampoline sees rsp % 16 == 0
    movq $0, 72(%rax)             // a zero word above the frame (fake return address of the trampoline)
    movq $0, 64(%rax)
    leaq SYM(ccoro_trampoline)(%rip), %r8
    movq %r8, 56(%rax)            // return address
    movq $0, 48(%rax)             // rbp
    movq $0, 40(%rax)             // rbx
    movq %rdx, 32(%rax)           // r12 = entry
    movq %rcx, 24(%rax)           // r13 = arg
    movq $0, 16(%rax)             // r14
    movq $0, 8(%rax)              // r15
    movl $0x1F80, (%rax)          // default MXCSR
    movw $0x037F, 4(%rax)         // default x87 control word
    movw $0, 6(%rax)
    movq %rax, (%rdi)
    ret
    .cfi_endproc
    SIZE(SYM(ccoro_make))

#endif

#if defined(__ELF__)
    .section .note.GNU-stack,"",%progbits
#endif
