// Exercises every relocation kind the linker resolves: syscall calls, calls to a
// static and a global function, lddw of read-only data, and a function-pointer
// table in read-only data called through callx.
typedef unsigned long u64;

void sol_log_(const char *msg, u64 len);
void sol_log_64_(u64 a, u64 b, u64 c, u64 d, u64 e);

static const char greeting[] = "hello from basic";

__attribute__((noinline)) static u64 twice(u64 x) { return x * 2; }
__attribute__((noinline)) u64 thrice(u64 x) { return x * 3; }
__attribute__((noinline)) u64 square(u64 x) { return x * x; }

typedef u64 (*op_fn)(u64);
static op_fn const ops[3] = {twice, thrice, square};

u64 entrypoint(const unsigned char *input) {
	sol_log_(greeting, sizeof(greeting) - 1);
	u64 sel = input[0] % 3;
	u64 v = ops[sel](input[1]);
	sol_log_64_(v, twice(v), thrice(v), 0, 0);
	return v == 42 ? 1 : 0;
}
