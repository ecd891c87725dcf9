// A mutable global: SBPF programs cannot have one, the linker must refuse it.
typedef unsigned long u64;
u64 counter = 7;

u64 entrypoint(const unsigned char *input) {
	counter += input[0];
	return counter;
}
