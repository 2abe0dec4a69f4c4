//! tgc facade
