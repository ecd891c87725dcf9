//! Logs, branches on its input and returns data-dependent results: enough code
//! to exercise rodata, calls and syscalls.
#![no_std]
extern "C" {
    fn sol_log_(msg: *const u8, len: u64);
}

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[inline(never)]
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0u64, |acc, &b| acc.rotate_left(5) ^ b as u64)
}

#[no_mangle]
pub unsafe extern "C" fn entrypoint(input: *const u8) -> u64 {
    let msg = b"okprog says hello";
    sol_log_(msg.as_ptr(), msg.len() as u64);
    let n = *(input as *const u64) as usize;
    let data = core::slice::from_raw_parts(input.add(8), n.min(64));
    checksum(data) & 0xff
}
