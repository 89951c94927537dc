//! Conversions between [`Value`] and PostgreSQL's wire formats.
//!
//! Parameters are bound to whatever type the server inferred for each placeholder. Integers,
//! floats, booleans, text and bytes go in binary; a `Text` value for any other type (timestamps,
//! dates, `json`/`jsonb`, `uuid`, `numeric`, enums, arrays, …) goes in PostgreSQL's text format,
//! so the server's own input function parses it and reports a bad value as a data exception.
//! Results are decoded from the binary format by type; a type with no faithful [`Value`] is an
//! `InvalidValue` error that suggests a cast to text.

use std::error::Error;
use std::fmt;

use bytes::{BufMut, BytesMut};
use chrono::{DateTime, NaiveDate, NaiveTime, SecondsFormat, TimeDelta};
use tokio_postgres::types::{Format, FromSql, IsNull, Kind, ToSql, Type, to_sql_checked};

use crate::Value;

/// A parameter or column that cannot be converted; becomes [`SqlError::InvalidValue`](crate::SqlError::InvalidValue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConversionError(pub String);

impl fmt::Display for ConversionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for ConversionError {}

type BoxError = Box<dyn Error + Sync + Send>;

fn conversion(message: String) -> BoxError {
    Box::new(ConversionError(message))
}

/// Whether `ty` is exchanged as plain UTF-8 text in both formats.
fn is_text_like(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    ) || ty.name() == "citext"
}

/// A [`Value`] bound as a PostgreSQL parameter of the type the server inferred.
#[derive(Debug)]
pub(crate) struct PgParam<'a>(pub &'a Value);

impl PgParam<'_> {
    /// Whether this value goes in text format for `ty` (parsed by the server's input function).
    fn uses_text_format(&self, ty: &Type) -> bool {
        match self.0 {
            Value::Text(_) => !is_text_like(ty) && *ty != Type::BYTEA,
            Value::Integer(_) | Value::Real(_) => *ty == Type::NUMERIC,
            _ => false,
        }
    }
}

fn mismatch(value: &Value, ty: &Type) -> BoxError {
    conversion(format!(
        "cannot bind a {} value to a parameter of type {}",
        value.kind(),
        ty.name()
    ))
}

fn out_of_range(value: &Value, ty: &Type) -> BoxError {
    conversion(format!(
        "{} value {} is out of range for type {}",
        value.kind(),
        match value {
            Value::Integer(i) => i.to_string(),
            Value::Real(f) => f.to_string(),
            _ => String::new(),
        },
        ty.name()
    ))
}

/// Formats a float for PostgreSQL's `numeric` input.
fn numeric_text(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        f.to_string()
    }
}

/// An `f64` with no fractional part, as an `i64`, if exactly representable.
fn integral(f: f64) -> Option<i64> {
    // 2^63 is exactly representable; anything at or beyond it does not fit.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    (f.fract() == 0.0 && (-LIMIT..LIMIT).contains(&f)).then_some(f as i64)
}

impl ToSql for PgParam<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let value = self.0;
        let int = |i: i64, out: &mut BytesMut| -> Result<(), BoxError> {
            match *ty {
                Type::INT2 => out.put_i16(i16::try_from(i).map_err(|_| out_of_range(value, ty))?),
                Type::INT4 => out.put_i32(i32::try_from(i).map_err(|_| out_of_range(value, ty))?),
                Type::INT8 => out.put_i64(i),
                Type::OID => out.put_u32(u32::try_from(i).map_err(|_| out_of_range(value, ty))?),
                _ => return Err(mismatch(value, ty)),
            }
            Ok(())
        };
        match value {
            Value::Null => return Ok(IsNull::Yes),
            Value::Boolean(b) => match *ty {
                Type::BOOL => out.put_u8(u8::from(*b)),
                Type::INT2 | Type::INT4 | Type::INT8 => int(i64::from(*b), out)?,
                _ if is_text_like(ty) => out.put_slice(if *b { b"true" } else { b"false" }),
                _ => return Err(mismatch(value, ty)),
            },
            Value::Integer(i) => match *ty {
                Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => int(*i, out)?,
                Type::FLOAT4 => out.put_f32(*i as f32),
                Type::FLOAT8 => out.put_f64(*i as f64),
                Type::NUMERIC => out.put_slice(i.to_string().as_bytes()),
                Type::BOOL => match i {
                    0 => out.put_u8(0),
                    1 => out.put_u8(1),
                    _ => return Err(out_of_range(value, ty)),
                },
                _ if is_text_like(ty) => out.put_slice(i.to_string().as_bytes()),
                _ => return Err(mismatch(value, ty)),
            },
            Value::Real(f) => match *ty {
                Type::FLOAT4 => {
                    if f.is_finite() && f.abs() > f64::from(f32::MAX) {
                        return Err(out_of_range(value, ty));
                    }
                    out.put_f32(*f as f32)
                }
                Type::FLOAT8 => out.put_f64(*f),
                Type::NUMERIC => out.put_slice(numeric_text(*f).as_bytes()),
                Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => {
                    int(integral(*f).ok_or_else(|| out_of_range(value, ty))?, out)?
                }
                _ if is_text_like(ty) => out.put_slice(f.to_string().as_bytes()),
                _ => return Err(mismatch(value, ty)),
            },
            Value::Text(s) => {
                // Text-like and bytea take the bytes as they are; every other type receives them
                // in text format (see `encode_format`) and parses them server-side.
                if s.contains('\0') {
                    return Err(conversion(
                        "text parameters cannot contain NUL characters".into(),
                    ));
                }
                out.put_slice(s.as_bytes())
            }
            Value::Blob(b) => match *ty {
                Type::BYTEA => out.put_slice(b),
                _ => return Err(mismatch(value, ty)),
            },
        }
        Ok(IsNull::No)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    fn encode_format(&self, ty: &Type) -> Format {
        if self.uses_text_format(ty) {
            Format::Text
        } else {
            Format::Binary
        }
    }

    to_sql_checked!();
}

/// One result column decoded into a [`Value`].
#[derive(Debug)]
pub(crate) struct PgOut(pub Value);

impl<'a> FromSql<'a> for PgOut {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        decode(ty, raw).map(PgOut)
    }

    fn from_sql_null(_ty: &Type) -> Result<Self, BoxError> {
        Ok(PgOut(Value::Null))
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }
}

fn utf8(raw: &[u8]) -> Result<String, BoxError> {
    std::str::from_utf8(raw)
        .map(str::to_owned)
        .map_err(|e| conversion(format!("column is not valid UTF-8: {e}")))
}

/// Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01).
const PG_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;

fn timestamp_text(micros: i64) -> Result<String, BoxError> {
    match micros {
        i64::MAX => return Ok("infinity".into()),
        i64::MIN => return Ok("-infinity".into()),
        _ => {}
    }
    micros
        .checked_add(PG_EPOCH_UNIX_MICROS)
        .and_then(DateTime::from_timestamp_micros)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
        .ok_or_else(|| conversion(format!("timestamp {micros} is out of range")))
}

fn decode(ty: &Type, raw: &[u8]) -> Result<Value, BoxError> {
    Ok(match *ty {
        Type::BOOL => Value::Boolean(bool::from_sql(ty, raw)?),
        Type::INT2 => Value::Integer(i16::from_sql(ty, raw)?.into()),
        Type::INT4 => Value::Integer(i32::from_sql(ty, raw)?.into()),
        Type::INT8 => Value::Integer(i64::from_sql(ty, raw)?),
        Type::OID => Value::Integer(u32::from_sql(ty, raw)?.into()),
        Type::FLOAT4 => Value::Real(f32::from_sql(ty, raw)?.into()),
        Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
        Type::BYTEA => Value::Blob(raw.to_vec()),
        Type::JSON => Value::Text(utf8(raw)?),
        Type::JSONB => match raw.split_first() {
            Some((1, rest)) => Value::Text(utf8(rest)?),
            _ => return Err(conversion("unsupported jsonb encoding version".into())),
        },
        Type::UUID => {
            let b: [u8; 16] = raw
                .try_into()
                .map_err(|_| conversion("uuid column is not 16 bytes".into()))?;
            Value::Text(format!(
                "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                b[0],
                b[1],
                b[2],
                b[3],
                b[4],
                b[5],
                b[6],
                b[7],
                b[8],
                b[9],
                b[10],
                b[11],
                b[12],
                b[13],
                b[14],
                b[15]
            ))
        }
        // `timestamp` (without time zone) is read as UTC: lethe's sessions run with TimeZone=UTC.
        Type::TIMESTAMPTZ | Type::TIMESTAMP => {
            Value::Text(timestamp_text(i64::from_sql(ty, raw)?)?)
        }
        Type::DATE => {
            let days = i32::from_sql(ty, raw)?;
            Value::Text(match days {
                i32::MAX => "infinity".into(),
                i32::MIN => "-infinity".into(),
                _ => NaiveDate::from_ymd_opt(2000, 1, 1)
                    .and_then(|epoch| epoch.checked_add_signed(TimeDelta::days(days.into())))
                    .map(|d| d.format("%Y-%m-%d").to_string())
                    .ok_or_else(|| conversion(format!("date {days} is out of range")))?,
            })
        }
        Type::TIME => {
            let micros = i64::from_sql(ty, raw)?;
            let secs = u32::try_from(micros.div_euclid(1_000_000)).ok();
            let nanos = u32::try_from(micros.rem_euclid(1_000_000) * 1000).ok();
            let time = secs
                .zip(nanos)
                .and_then(|(s, n)| NaiveTime::from_num_seconds_from_midnight_opt(s, n))
                .ok_or_else(|| conversion(format!("time {micros} is out of range")))?;
            Value::Text(time.format("%H:%M:%S%.f").to_string())
        }
        Type::NUMERIC => Value::Text(numeric_from_binary(raw)?),
        _ if is_text_like(ty) || matches!(ty.kind(), Kind::Enum(_)) => Value::Text(utf8(raw)?),
        _ => {
            return Err(conversion(format!(
                "a result column has type {} which has no lethe value; cast it in the query, e.g. `column::text`",
                ty.name()
            )));
        }
    })
}

/// Decodes PostgreSQL's binary `numeric` into exact decimal text.
fn numeric_from_binary(raw: &[u8]) -> Result<String, BoxError> {
    let bad = || conversion("malformed numeric value".into());
    let word = |i: usize| -> Result<u16, BoxError> {
        raw.get(i..i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(bad)
    };
    let ndigits = usize::try_from(word(0)? as i16).map_err(|_| bad())?;
    let weight = i64::from(word(2)? as i16);
    let sign = word(4)?;
    let dscale = usize::from(word(6)?);
    if raw.len() != 8 + 2 * ndigits {
        return Err(bad());
    }
    match sign {
        0xC000 => return Ok("NaN".into()),
        0xD000 => return Ok("Infinity".into()),
        0xF000 => return Ok("-Infinity".into()),
        0x0000 | 0x4000 => {}
        _ => return Err(bad()),
    }
    let mut digits = Vec::with_capacity(ndigits);
    for i in 0..ndigits {
        let d = word(8 + 2 * i)?;
        if d > 9999 {
            return Err(bad());
        }
        digits.push(d);
    }
    let digit = |idx: i64| -> u16 {
        usize::try_from(idx)
            .ok()
            .and_then(|i| digits.get(i).copied())
            .unwrap_or(0)
    };
    let mut out = String::new();
    if sign == 0x4000 {
        out.push('-');
    }
    if weight < 0 {
        out.push('0');
    } else {
        out.push_str(&digit(0).to_string());
        for idx in 1..=weight {
            out.push_str(&format!("{:04}", digit(idx)));
        }
    }
    if dscale > 0 {
        let mut frac = String::with_capacity(dscale + 4);
        let mut idx = weight + 1;
        while frac.len() < dscale {
            frac.push_str(&format!("{:04}", digit(idx)));
            idx += 1;
        }
        frac.truncate(dscale);
        out.push('.');
        out.push_str(&frac);
    }
    if out == "-0" || (out.starts_with("-0") && out[1..].chars().all(|c| c == '0' || c == '.')) {
        out.remove(0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(ndigits: i16, weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&ndigits.to_be_bytes());
        v.extend_from_slice(&weight.to_be_bytes());
        v.extend_from_slice(&sign.to_be_bytes());
        v.extend_from_slice(&dscale.to_be_bytes());
        for d in digits {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v
    }

    #[test]
    fn decodes_numeric() {
        // 12345.678 = [1, 2345, 6780], weight 1, dscale 3
        assert_eq!(
            numeric_from_binary(&numeric(3, 1, 0, 3, &[1, 2345, 6780])).unwrap(),
            "12345.678"
        );
        // -0.0001 = [1], weight -1, dscale 4
        assert_eq!(
            numeric_from_binary(&numeric(1, -1, 0x4000, 4, &[1])).unwrap(),
            "-0.0001"
        );
        // 0 with scale 2
        assert_eq!(
            numeric_from_binary(&numeric(0, 0, 0, 2, &[])).unwrap(),
            "0.00"
        );
        // 10000 = [1], weight 1
        assert_eq!(
            numeric_from_binary(&numeric(1, 1, 0, 0, &[1])).unwrap(),
            "10000"
        );
        // 0.00001234 = [0, 1234] weight -2 -> digits [1234] weight -2, dscale 8
        assert_eq!(
            numeric_from_binary(&numeric(1, -2, 0, 8, &[1234])).unwrap(),
            "0.00001234"
        );
        assert_eq!(
            numeric_from_binary(&numeric(0, 0, 0xC000, 0, &[])).unwrap(),
            "NaN"
        );
        assert!(numeric_from_binary(&[1, 2, 3]).is_err());
        assert!(numeric_from_binary(&numeric(2, 0, 0, 0, &[1])).is_err());
        assert!(numeric_from_binary(&numeric(1, 0, 0, 0, &[10000])).is_err());
    }

    #[test]
    fn decodes_timestamps() {
        assert_eq!(timestamp_text(0).unwrap(), "2000-01-01T00:00:00Z");
        assert_eq!(
            timestamp_text(1_500_000).unwrap(),
            "2000-01-01T00:00:01.500Z"
        );
        assert_eq!(timestamp_text(i64::MAX).unwrap(), "infinity");
        assert!(timestamp_text(i64::MAX - 1).is_err());
    }

    #[test]
    fn binds_integers_with_range_checks() {
        let mut out = BytesMut::new();
        let v = Value::Integer(70_000);
        assert!(PgParam(&v).to_sql(&Type::INT2, &mut out).is_err());
        assert!(PgParam(&v).to_sql(&Type::INT4, &mut out).is_ok());
        assert!(
            PgParam(&Value::Real(1.5))
                .to_sql(&Type::INT8, &mut out)
                .is_err()
        );
        assert!(
            PgParam(&Value::Real(2.0))
                .to_sql(&Type::INT8, &mut out)
                .is_ok()
        );
        assert!(
            PgParam(&Value::Blob(vec![1]))
                .to_sql(&Type::TEXT, &mut out)
                .is_err()
        );
        assert!(matches!(
            PgParam(&Value::Text("2024-01-01T00:00:00Z".into())).encode_format(&Type::TIMESTAMPTZ),
            Format::Text
        ));
        assert!(matches!(
            PgParam(&Value::Text("x".into())).encode_format(&Type::TEXT),
            Format::Binary
        ));
    }
}
