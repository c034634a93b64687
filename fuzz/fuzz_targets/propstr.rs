//! libFuzzer entry point; the work is `proxops_fuzz::propstr`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| proxops_fuzz::propstr(data));
