//! tgc macros
