//! Decimal digits written into a caller's buffer without allocating: what code between
//! fork and exec may do.

/// Writes the decimal digits of `n` into `out` from its start; returns how many (all of
/// them when `out` holds 10 bytes, the most a `u32` has).
pub fn write_decimal(n: u32, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 10];
    let mut n = n;
    let mut count = 0;
    loop {
        digits[count] = b'0' + (n % 10) as u8;
        count += 1;
        n /= 10;
        if n == 0 || count == digits.len() {
            break;
        }
    }
    let written = count.min(out.len());
    for (i, slot) in out.iter_mut().take(written).enumerate() {
        *slot = digits[count - 1 - i];
    }
    written
}

#[cfg(test)]
mod tests {
    use super::write_decimal;

    #[test]
    fn digits_come_out_in_order() {
        let mut out = [0u8; 10];
        let n = write_decimal(4_294_967_295, &mut out);
        assert_eq!(&out[..n], b"4294967295");
        let n = write_decimal(0, &mut out);
        assert_eq!(&out[..n], b"0");
        let mut short = [0u8; 2];
        assert_eq!(write_decimal(123, &mut short), 2);
        assert_eq!(&short, b"12");
    }
}
