//! Misused markers fail the build with an error at the attribute that says how
//! to fix it.

#[test]
fn marker_misuse_is_a_compile_error() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
