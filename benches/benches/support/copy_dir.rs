//! A destination copied file by file, for the benches that time each sample on a fresh copy of
//! a template destination (the copy untimed).

use std::fs;
use std::path::Path;

/// `from` copied to `to`, file by file.
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("copy dir");
    for entry in fs::read_dir(from).expect("read") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
