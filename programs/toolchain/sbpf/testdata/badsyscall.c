// A misspelt syscall must fail at link time, not at deploy.
typedef unsigned long u64;
void sol_lgg_(const char *msg, u64 len);

u64 entrypoint(const unsigned char *input) {
	sol_lgg_((const char *)input, 4);
	return 0;
}
