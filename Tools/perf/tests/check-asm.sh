#!/bin/bash
# Check that Python/asm_trampoline.S assembles for every architecture it
# supports, with and without the hardening options, and that it carries
# the landing pads and GNU property notes those options need.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

S=$TOP/Python/asm_trampoline.S
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {   # check NAME CC FLAGS DISASM-PATTERN NOTE-PATTERN
    local name=$1 cc=$2 flags=$3 insn=$4 note=$5
    if ! command -v "$cc" >/dev/null; then
        echo "SKIP asm $name: $cc not installed"
        return
    fi
    local obj=$tmp/$name.o objdump=${cc%gcc}objdump readelf=${cc%gcc}readelf
    if ! "$cc" $flags -c "$S" -o "$obj"; then
        echo "FAIL asm $name: does not assemble"; fail=1; return
    fi
    if ! "$objdump" -d "$obj" | grep -qE "$insn"; then
        echo "FAIL asm $name: missing $insn"; fail=1; return
    fi
    if [ -n "$note" ] && ! "$readelf" -n "$obj" | grep -qE "$note"; then
        echo "FAIL asm $name: missing GNU property note ($note)"; fail=1; return
    fi
    if ! "$readelf" -S "$obj" | grep -q 'note.GNU-stack'; then
        echo "FAIL asm $name: missing .note.GNU-stack"; fail=1; return
    fi
    echo "ok   asm $name"
}
check x86_64 gcc "" 'endbr64' ''
check x86_64-cet gcc "-fcf-protection=full" 'endbr64' 'IBT, SHSTK'
check aarch64 aarch64-linux-gnu-gcc "" 'bti' ''
check aarch64-bti-pac aarch64-linux-gnu-gcc "-mbranch-protection=standard" 'paciasp' 'BTI, PAC'
check aarch64-pac-bkey aarch64-linux-gnu-gcc "-mbranch-protection=pac-ret+b-key" 'pacibsp' 'PAC'
check riscv64 riscv64-linux-gnu-gcc "" 'jalr' ''
exit $fail
