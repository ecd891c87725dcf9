//! A mutable static: SBPF v0 programs have no writable data section.
#![no_std]
extern "C" {
    fn sol_log_(msg: *const u8, len: u64);
}

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}

static mut INVOCATIONS: u64 = 3;

#[no_mangle]
pub unsafe extern "C" fn entrypoint(input: *const u64) -> u64 {
    let msg = b"count";
    sol_log_(msg.as_ptr(), msg.len() as u64);
    let p = core::ptr::addr_of_mut!(INVOCATIONS);
    *p += *input;
    *p
}
