//! libFuzzer entry point; the work is `proxops_fuzz::manifest`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| proxops_fuzz::manifest(data));
