//! A write breakpoint event on one word.
