#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice::fuzzing::slice_content_range(data));
