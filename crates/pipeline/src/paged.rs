//! Copy-on-write hash buckets: the storage under each classifier subtable.
//!
//! `Paged<T>` is an array of `n` buckets (`n` a power of two, at least [`PAGE`]) of items of
//! type `T`. Buckets are grouped in pages of [`PAGE`] buckets stored back to back in one `Vec`
//! behind an `Arc`, and pages in chunks of up to [`CHUNK`] page pointers behind another `Arc`.
//! Cloning a `Paged` copies only the chunk pointers (`n / (PAGE * CHUNK)`); changing a bucket
//! of a clone copies that one chunk's page pointers and that one page. A table the control
//! side changes right after each publish (a controller adding one flow per packet-in) thus
//! pays `n / 1024 + 64` pointer copies per change instead of `n / 16`. The owner picks the
//! bucket (from a hash) and the position within it; this type only stores.

use std::sync::Arc;

/// log2 of [`PAGE`].
pub const PAGE_BITS: u32 = 4;
/// Buckets per page.
pub const PAGE: usize = 1 << PAGE_BITS;
/// log2 of [`CHUNK`].
pub const CHUNK_BITS: u32 = 6;
/// Pages per chunk.
pub const CHUNK: usize = 1 << CHUNK_BITS;

/// One page: bucket `i` is `items[start[i]..start[i + 1]]`.
#[derive(Debug, Clone)]
struct PageData<T> {
    start: [u32; PAGE + 1],
    items: Vec<T>,
}

/// Up to [`CHUNK`] pages.
type Chunk<T> = Vec<Arc<PageData<T>>>;

/// Paged buckets (see the module docs).
#[derive(Debug)]
pub struct Paged<T> {
    n_buckets: usize,
    chunks: Vec<Arc<Chunk<T>>>,
}

impl<T> Clone for Paged<T> {
    fn clone(&self) -> Self {
        Paged {
            n_buckets: self.n_buckets,
            chunks: self.chunks.clone(),
        }
    }
}

impl<T: Clone> Default for Paged<T> {
    fn default() -> Self {
        Self::from_buckets((0..PAGE).map(|_| Vec::new()).collect())
    }
}

impl<T: Clone> Paged<T> {
    /// Builds from a list of buckets (its length must be a power of two >= [`PAGE`]).
    fn from_buckets(buckets: Vec<Vec<T>>) -> Self {
        let n_buckets = buckets.len();
        let mut pages = Vec::with_capacity(n_buckets / PAGE);
        let mut page = PageData {
            start: [0; PAGE + 1],
            items: Vec::new(),
        };
        for (i, b) in buckets.into_iter().enumerate() {
            let j = i % PAGE;
            page.start[j] = page.items.len() as u32;
            page.items.extend(b);
            if j == PAGE - 1 {
                page.start[PAGE] = page.items.len() as u32;
                let full = std::mem::replace(
                    &mut page,
                    PageData {
                        start: [0; PAGE + 1],
                        items: Vec::new(),
                    },
                );
                pages.push(Arc::new(full));
            }
        }
        let chunks = pages.chunks(CHUNK).map(|c| Arc::new(c.to_vec())).collect();
        Paged { n_buckets, chunks }
    }

    /// Number of buckets.
    #[inline(always)]
    pub fn n_buckets(&self) -> usize {
        self.n_buckets
    }

    /// The bucket for hash `h`.
    #[inline(always)]
    pub fn slot(&self, h: u32) -> usize {
        h as usize & (self.n_buckets - 1)
    }

    #[inline(always)]
    fn page(&self, slot: usize) -> &PageData<T> {
        let page = slot >> PAGE_BITS;
        &self.chunks[page >> CHUNK_BITS][page & (CHUNK - 1)]
    }

    /// The page holding `slot`, copied first (its chunk too) if shared.
    fn page_mut(&mut self, slot: usize) -> &mut PageData<T> {
        let page = slot >> PAGE_BITS;
        let chunk = Arc::make_mut(&mut self.chunks[page >> CHUNK_BITS]);
        Arc::make_mut(&mut chunk[page & (CHUNK - 1)])
    }

    /// Bucket `slot`.
    #[inline(always)]
    pub fn bucket(&self, slot: usize) -> &[T] {
        let p = self.page(slot);
        let i = slot & (PAGE - 1);
        &p.items[p.start[i] as usize..p.start[i + 1] as usize]
    }

    /// Bucket `slot`, writable in place (its page is copied first if shared).
    pub fn bucket_mut(&mut self, slot: usize) -> &mut [T] {
        let p = self.page_mut(slot);
        let i = slot & (PAGE - 1);
        &mut p.items[p.start[i] as usize..p.start[i + 1] as usize]
    }

    /// Inserts `item` at position `at` of bucket `slot`.
    pub fn insert(&mut self, slot: usize, at: usize, item: T) {
        let p = self.page_mut(slot);
        let i = slot & (PAGE - 1);
        p.items.insert(p.start[i] as usize + at, item);
        for s in &mut p.start[i + 1..] {
            *s += 1;
        }
    }

    /// Removes and returns the item at position `at` of bucket `slot`.
    pub fn remove(&mut self, slot: usize, at: usize) -> T {
        let p = self.page_mut(slot);
        let i = slot & (PAGE - 1);
        let item = p.items.remove(p.start[i] as usize + at);
        for s in &mut p.start[i + 1..] {
            *s -= 1;
        }
        item
    }

    /// Every item, bucket by bucket.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks
            .iter()
            .flat_map(|c| c.iter())
            .flat_map(|p| p.items.iter())
    }

    /// Doubles the bucket count; `hash` gives each item's hash. Items keep their relative
    /// order within a bucket.
    pub fn grow(&mut self, hash: impl Fn(&T) -> u32) {
        let n = self.n_buckets * 2;
        let mut fresh: Vec<Vec<T>> = (0..n).map(|_| Vec::new()).collect();
        for item in self.iter() {
            fresh[hash(item) as usize & (n - 1)].push(item.clone());
        }
        *self = Self::from_buckets(fresh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_grow_and_share() {
        let mut p: Paged<u32> = Paged::default();
        for v in 0..100u32 {
            let s = p.slot(v);
            let at = p.bucket(s).len();
            p.insert(s, at, v);
        }
        let snapshot = p.clone();
        p.grow(|v| *v);
        assert_eq!(p.n_buckets(), 2 * PAGE);
        for v in 0..100u32 {
            assert!(p.bucket(p.slot(v)).contains(&v));
        }
        let s = p.slot(7);
        let at = p.bucket(s).iter().position(|x| *x == 7).unwrap();
        assert_eq!(p.remove(s, at), 7);
        p.bucket_mut(p.slot(8))[0] = 1000 + 8;
        assert_eq!(p.iter().count(), 99);
        assert_eq!(snapshot.iter().count(), 100, "the clone is untouched");
        assert!(snapshot.bucket(snapshot.slot(7)).contains(&7));
    }

    #[test]
    fn a_change_to_a_clone_copies_one_chunk_and_one_page() {
        let mut p: Paged<u32> = Paged::default();
        while p.n_buckets() < 4 * PAGE * CHUNK {
            p.grow(|v| *v);
        }
        for v in 0..20_000u32 {
            let s = p.slot(v);
            let at = p.bucket(s).len();
            p.insert(s, at, v);
        }
        assert_eq!(p.chunks.len(), 4);
        let snapshot = p.clone();
        let s = p.slot(12_345);
        let at = p.bucket(s).len();
        p.insert(s, at, 99_999);
        let shared_chunks = p
            .chunks
            .iter()
            .zip(&snapshot.chunks)
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count();
        assert_eq!(shared_chunks, 3, "only the changed chunk is copied");
        let changed = s >> (PAGE_BITS + CHUNK_BITS);
        let shared_pages = p.chunks[changed]
            .iter()
            .zip(snapshot.chunks[changed].iter())
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count();
        assert_eq!(shared_pages, CHUNK - 1, "only the changed page is copied");
        assert_eq!(p.iter().count(), 20_001);
        assert_eq!(snapshot.iter().count(), 20_000);
        for v in (0..20_000u32).step_by(97) {
            assert!(p.bucket(p.slot(v)).contains(&v));
            assert!(snapshot.bucket(snapshot.slot(v)).contains(&v));
        }
        assert!(p.bucket(s).contains(&99_999));
        assert!(!snapshot.bucket(s).contains(&99_999));
    }
}
