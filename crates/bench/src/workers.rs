//! Pinned worker threads started on a barrier, timed from the first start to the last
//! finish.
