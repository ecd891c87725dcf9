//! A non-inlined call with six arguments: upstream BPF has no stack arguments.
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
pub fn mix_six(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) -> u64 {
    a.rotate_left(b as u32) ^ c.wrapping_mul(d) ^ e.wrapping_sub(f)
}

#[no_mangle]
pub unsafe extern "C" fn entrypoint(input: *const u64) -> u64 {
    let v = core::slice::from_raw_parts(input, 7);
    let mut acc = 0;
    for i in 0..v[6] {
        acc ^= mix_six(v[0] + i, v[1], v[2], v[3] ^ acc, v[4], v[5]);
    }
    let msg = b"six";
    sol_log_(msg.as_ptr(), msg.len() as u64);
    acc
}
