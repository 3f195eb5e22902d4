//! How an external sort of record batches spends its memory budget: how many pieces it reads at
//! once, when the rows it holds make a run, and how many runs one merge takes. The CLI's table
//! sort asks; the budget is the caller's (the CLI's default: three quarters of the available
//! memory).

/// Runs one merge takes (each holds an open file and one batch in the merge); more are merged
/// in levels, the earliest first.
pub const MERGE_FAN_IN: usize = 64;

/// The most rows one sorted run holds: the permutation indexes rows with u32 (less a margin of
/// whole batches).
pub const MAX_RUN_ROWS: usize = u32::MAX as usize - (1 << 16);

/// Whether rows held so far (`bytes`, `rows`) make a run: half the budget, since a run and its
/// sorted copy are held at once.
pub fn run_is_full(bytes: usize, rows: usize, budget: Option<u64>) -> bool {
    budget.is_some_and(|b| bytes as u64 >= b / 2) || rows >= MAX_RUN_ROWS
}

/// Pieces (row groups, files) read at once on `threads` threads: as many as a quarter of the
/// budget holds, each up to `largest_piece` bytes, at least one.
pub fn read_ahead(budget: Option<u64>, largest_piece: u64, threads: usize) -> usize {
    match budget {
        Some(b) => (b / 4 / largest_piece.max(1)).clamp(1, threads.max(1) as u64) as usize,
        None => threads.max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_reads_follow_the_budget() {
        assert!(!run_is_full(1 << 20, 10, None));
        assert!(run_is_full(MAX_RUN_ROWS, MAX_RUN_ROWS, None));
        assert!(!run_is_full(499, 10, Some(1000)));
        assert!(run_is_full(500, 10, Some(1000)));
        assert_eq!(read_ahead(None, 1 << 30, 16), 16);
        assert_eq!(read_ahead(Some(64 << 30), 64 << 20, 16), 16);
        assert_eq!(read_ahead(Some(1 << 30), 64 << 20, 16), 4);
        assert_eq!(read_ahead(Some(1 << 10), 64 << 20, 16), 1);
        assert_eq!(read_ahead(Some(1 << 30), 0, 0), 1);
    }
}
