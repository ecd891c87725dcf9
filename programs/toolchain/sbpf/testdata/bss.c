// A zero-initialised mutable global lands in .bss: refused like .data.
typedef unsigned long u64;
static u64 calls;

u64 entrypoint(const unsigned char *input) {
	calls += input[0];
	return calls;
}
