//! The columns a row leaves as they are in the table (Debezium did not read them: a TOASTed
//! value an update left unchanged), shared between a decoded record and its rows.

use std::ops::Deref;
use std::sync::Arc;

/// Positions of the columns a row keeps. Nearly every row keeps none, and then it holds no
/// allocation (a decoded record and its row would otherwise allocate one each).
#[derive(Debug, Clone, Default)]
pub struct Keep(Option<Arc<[usize]>>);

impl Deref for Keep {
    type Target = [usize];

    fn deref(&self) -> &[usize] {
        self.0.as_deref().unwrap_or(&[])
    }
}

impl PartialEq for Keep {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl From<Vec<usize>> for Keep {
    fn from(positions: Vec<usize>) -> Self {
        Self((!positions.is_empty()).then(|| positions.into()))
    }
}

impl From<&[usize]> for Keep {
    fn from(positions: &[usize]) -> Self {
        Self((!positions.is_empty()).then(|| positions.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::Keep;

    #[test]
    fn empty_is_empty_however_it_was_made() {
        let none = Keep::default();
        assert!(none.is_empty());
        assert_eq!(none, Keep::from(Vec::new()));
        assert_eq!(none, Keep::from(&[][..]));
        let some = Keep::from(vec![4, 1]);
        assert_eq!(&*some, [4, 1]);
        assert!(some.contains(&1));
        assert_ne!(some, none);
        assert_eq!(some.clone(), Keep::from(&[4, 1][..]));
    }
}
