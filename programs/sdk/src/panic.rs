//! Panic reporting without `core::fmt`: integer formatting through fmt pulls in
//! `pad_integral`, a six-argument function upstream BPF cannot call.

/// Reports a panic's location through `sol_panic_`, which logs
/// "file:line:column" and fails the instruction. Installed by
/// [`entrypoint!`](crate::entrypoint) as the `bpf` target's panic handler.
#[cfg(target_arch = "bpf")]
pub fn report(info: &core::panic::PanicInfo<'_>) -> ! {
    let (file, line, column) = match info.location() {
        Some(l) => (l.file(), l.line() as u64, l.column() as u64),
        None => ("<unknown>", 0, 0),
    };
    // SAFETY: file is a valid string for the duration of the call.
    unsafe { pinocchio::syscalls::sol_panic_(file.as_ptr(), file.len() as u64, line, column) }
}
