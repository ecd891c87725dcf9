package sbpf

import "sort"

// knownSyscalls lists the syscalls that the Agave runtime registers for SBPF v0
// programs (solana-bpf-loader-program's syscall table). The loader rejects any
// other undefined symbol at deploy time; checking at link time turns a typo into a
// build error that names the calling function.
var knownSyscalls = map[string]bool{
	"abort":                                 true,
	"sol_panic_":                            true,
	"sol_log_":                              true,
	"sol_log_64_":                           true,
	"sol_log_compute_units_":                true,
	"sol_log_pubkey":                        true,
	"sol_log_data":                          true,
	"sol_create_program_address":            true,
	"sol_try_find_program_address":          true,
	"sol_sha256":                            true,
	"sol_keccak256":                         true,
	"sol_blake3":                            true,
	"sol_secp256k1_recover":                 true,
	"sol_curve_validate_point":              true,
	"sol_curve_group_op":                    true,
	"sol_curve_multiscalar_mul":             true,
	"sol_alt_bn128_group_op":                true,
	"sol_alt_bn128_compression":             true,
	"sol_big_mod_exp":                       true,
	"sol_poseidon":                          true,
	"sol_get_clock_sysvar":                  true,
	"sol_get_epoch_schedule_sysvar":         true,
	"sol_get_fees_sysvar":                   true,
	"sol_get_rent_sysvar":                   true,
	"sol_get_last_restart_slot":             true,
	"sol_get_epoch_rewards_sysvar":          true,
	"sol_get_sysvar":                        true,
	"sol_get_epoch_stake":                   true,
	"sol_memcpy_":                           true,
	"sol_memmove_":                          true,
	"sol_memcmp_":                           true,
	"sol_memset_":                           true,
	"sol_invoke_signed_c":                   true,
	"sol_invoke_signed_rust":                true,
	"sol_alloc_free_":                       true,
	"sol_set_return_data":                   true,
	"sol_get_return_data":                   true,
	"sol_get_processed_sibling_instruction": true,
	"sol_get_stack_height":                  true,
	"sol_remaining_compute_units":           true,
}

// IsSyscall reports whether name is a syscall the runtime provides.
func IsSyscall(name string) bool { return knownSyscalls[name] }

// Syscalls returns the known syscall names, sorted.
func Syscalls() []string {
	names := make([]string, 0, len(knownSyscalls))
	for n := range knownSyscalls {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
