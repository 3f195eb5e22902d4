//! Where a sort of keys in host memory runs under a memory budget, decided before any work: in
//! memory on the device (one GPU sort, or pieces merged on the host), or the external sort's
//! sorted runs and merge (`sort::external`). The CLI's `--memory-budget` asks here; any front end
//! holding keys on the host can.

use crate::keys::KeyType;

/// What an in-memory sort holds besides the keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holds {
    /// A u32 payload sorted along (`--values`).
    pub values: bool,
    /// The permutation (`--argsort`).
    pub permutation: bool,
    /// The input kept to check the result against (`--verify`).
    pub verify: bool,
    /// More keys than one GPU sort takes: sorted in pieces, merged on the host.
    pub pieces: bool,
}

/// Bytes an in-memory sort of `n` keys holds, roughly: a plain sort one host copy of the keys (the
/// input itself stays a memory map); with a payload, permutation or check the arrays, their
/// gathered copies and the kept input; in pieces the merge's (key, position) runs as well.
pub fn in_memory_bytes(n: usize, key_type: KeyType, holds: Holds) -> u64 {
    let (n, s) = (n as u64, key_type.size() as u64);
    let Holds {
        values,
        permutation,
        verify,
        pieces,
    } = holds;
    let mut need = if values || permutation || verify || pieces {
        2 * n * (s + 4 * values as u64 + 4 * permutation as u64)
    } else {
        n * s
    };
    if verify {
        need += n * s;
    }
    if pieces {
        need += 32 * n;
    }
    need
}

/// Where a sort goes (see [`route`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    InMemory,
    External,
    /// In memory, unless the device sorts these keys in pieces (more than one GPU sort takes:
    /// `Sorter::one_sort_max`), whose merge would break the budget.
    AskDevice,
}

/// Keys beyond which a sort that cannot ask the device assumes pieces: one GPU binding's 2 GiB
/// on NVIDIA, the largest one sort takes on most devices.
const ASSUME_PIECES_FROM: u64 = 2 << 30;

/// Where a sort of `n` keys holding `holds` (its `pieces` ignored) runs within `budget` bytes.
/// `can_ask`: the sort can ask the device before it starts (the plain sort of one file on a GPU);
/// the others assume pieces past 2 GiB of keys and none below.
pub fn route(n: usize, key_type: KeyType, holds: Holds, budget: u64, can_ask: bool) -> Route {
    let whole = in_memory_bytes(
        n,
        key_type,
        Holds {
            pieces: false,
            ..holds
        },
    );
    let pieced = in_memory_bytes(
        n,
        key_type,
        Holds {
            pieces: true,
            ..holds
        },
    );
    if whole > budget {
        Route::External
    } else if pieced <= budget {
        Route::InMemory
    } else if can_ask {
        Route::AskDevice
    } else if n as u64 * key_type.size() as u64 > ASSUME_PIECES_FROM {
        Route::External
    } else {
        Route::InMemory
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_routes_sorts_in_memory_externally_or_asks_the_device() {
        let gib = 1usize << 30;
        let plain = Holds::default();
        let argsort = Holds {
            permutation: true,
            ..Holds::default()
        };
        let budget = 4 << 30;
        // u32 keys, plain: n*4 whole, n*40 in pieces
        // over the budget even without pieces: external, whatever the path
        assert_eq!(
            route(gib + 1, KeyType::U32, plain, budget, true),
            Route::External
        );
        // within it even with pieces: in memory
        assert_eq!(
            route(gib / 16, KeyType::U32, plain, budget, true),
            Route::InMemory
        );
        // only pieces break it: the plain sort asks the device; the others assume pieces past 2
        // GiB of keys and none below
        assert_eq!(
            route(gib / 2, KeyType::U32, plain, budget, true),
            Route::AskDevice
        );
        assert_eq!(
            route(gib / 4, KeyType::U32, argsort, budget, false),
            Route::InMemory
        );
        assert_eq!(
            route(gib / 8, KeyType::U64, argsort, budget, false),
            Route::InMemory
        );
        // 3 GiB of u32 keys: within 16 GiB whole, not in pieces
        let big = 3 * (gib / 4);
        assert_eq!(
            route(big, KeyType::U32, plain, 16 << 30, false),
            Route::External
        );
        assert_eq!(
            route(big, KeyType::U32, plain, 16 << 30, true),
            Route::AskDevice
        );
    }

    #[test]
    fn pieces_add_the_merges_runs() {
        let n = 1 << 20;
        assert_eq!(
            in_memory_bytes(n, KeyType::U32, Holds::default()),
            4 * n as u64
        );
        let pieces = Holds {
            pieces: true,
            ..Holds::default()
        };
        assert_eq!(
            in_memory_bytes(n, KeyType::U32, pieces),
            (2 * 4 + 32) * n as u64
        );
        let checked_pairs = Holds {
            values: true,
            verify: true,
            ..Holds::default()
        };
        assert_eq!(
            in_memory_bytes(n, KeyType::U64, checked_pairs),
            (2 * (8 + 4) + 8) * n as u64
        );
    }
}
