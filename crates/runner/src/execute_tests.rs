use super::*;

#[test]
fn the_raw_line_budget_stores_a_prefix_and_counts_the_rest() {
    let mut budget = RawLineBudget {
        lines_left: 3,
        bytes_left: 10,
        ..RawLineBudget::default()
    };
    assert!(budget.admit("abcd"));
    assert!(budget.admit("efgh"));
    // 2 bytes left: this line does not fit, and nothing after it is stored.
    assert!(!budget.admit("ijk"));
    assert!(!budget.admit("l"));
    assert_eq!(budget.dropped, 2);

    let mut by_count = RawLineBudget {
        lines_left: 2,
        bytes_left: 1_000,
        ..RawLineBudget::default()
    };
    assert!(by_count.admit("a") && by_count.admit("b"));
    assert!(!by_count.admit("c"));
    assert_eq!(by_count.dropped, 1);
    let default = RawLineBudget::default();
    assert_eq!(
        (default.lines_left, default.bytes_left),
        (MAX_RAW_LINES, MAX_RAW_BYTES)
    );
}
