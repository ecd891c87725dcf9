//! Floating point: upstream BPF has no FPU and no soft-float libcalls.
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
pub fn scale_by_ratio(x: u64, num: u64, den: u64) -> u64 {
    (x as f64 * (num as f64 / den as f64)) as u64
}

#[no_mangle]
pub unsafe extern "C" fn entrypoint(input: *const u64) -> u64 {
    let v = core::slice::from_raw_parts(input, 3);
    let msg = b"float";
    sol_log_(msg.as_ptr(), msg.len() as u64);
    scale_by_ratio(v[0], v[1], v[2])
}
