// Built with -mcpu=v3, 32-bit comparisons become JMP32 instructions, which
// SBPF v0 does not have.
typedef unsigned int u32;
typedef unsigned long u64;

u64 entrypoint(const u32 *input) {
	u32 a = input[0], b = input[1];
	if (a < b)
		return 1;
	return a == 7 ? 2 : 0;
}
