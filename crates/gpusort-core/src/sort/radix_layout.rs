//! Parameters of the radix sort that its kernels' host code and its CPU twin
//! (`reference::radix`) share: the twin mirrors the MSD path's bins, so both read them here and
//! neither imports the other.

/// msd_local's and msd_dense's bins: 1 << MSD_BIN_BITS, so that a tile of 4,608 keys spreads
/// about one key a bin.
pub const MSD_BIN_BITS: u32 = 12;
/// The most keys an msd_local bin ranks by comparisons (each key compared with each of its bin's);
/// a tile with a fuller bin of unequal keys goes to msd_dense's counting sort (a full bin of
/// equal keys is in place already). A tile of such bins costs about what one 16-bit bucket costs
/// msd_dense.
pub const MSD_GROUP_MAX: u32 = 64;
