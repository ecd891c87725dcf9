//! u128 multiplication becomes a __multi3 libcall, which upstream BPF lacks.
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
pub fn wide_product(a: u64, b: u64, c: u64) -> u128 {
    (a as u128 * b as u128) * c as u128
}

#[no_mangle]
pub unsafe extern "C" fn entrypoint(input: *const u64) -> u64 {
    let v = core::slice::from_raw_parts(input, 3);
    let msg = b"wide";
    sol_log_(msg.as_ptr(), msg.len() as u64);
    (wide_product(v[0], v[1], v[2]) >> 64) as u64
}
