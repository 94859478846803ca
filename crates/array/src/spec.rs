//! What a new array is: shape, data type, chunk shape, codecs, fill value, attributes. A spec
//! becomes the array's `zarr.json` exactly as the Zarr v3 specification writes it (core
//! `bytes`, `zstd`, `gzip`, `blosc`, `crc32c` and `sharding_indexed` codecs), so every Zarr v3
//! reader opens it. Codecs are also written as short strings (`zstd:3`, `blosc:lz4:5:shuffle`)
//! for the command line, Python and C.

use std::str::FromStr;

use serde_json::{Map, Value, json};

use crate::ArrayError;

/// The fixed-size data types of Zarr v3 core that the bindings exchange as raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
}

impl DataType {
    const ALL: [DataType; 11] = [
        Self::Bool,
        Self::Int8,
        Self::Int16,
        Self::Int32,
        Self::Int64,
        Self::UInt8,
        Self::UInt16,
        Self::UInt32,
        Self::UInt64,
        Self::Float32,
        Self::Float64,
    ];

    /// The Zarr v3 name (`float32`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::Int8 => "int8",
            Self::Int16 => "int16",
            Self::Int32 => "int32",
            Self::Int64 => "int64",
            Self::UInt8 => "uint8",
            Self::UInt16 => "uint16",
            Self::UInt32 => "uint32",
            Self::UInt64 => "uint64",
            Self::Float32 => "float32",
            Self::Float64 => "float64",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::Bool | Self::Int8 | Self::UInt8 => 1,
            Self::Int16 | Self::UInt16 => 2,
            Self::Int32 | Self::UInt32 | Self::Float32 => 4,
            Self::Int64 | Self::UInt64 | Self::Float64 => 8,
        }
    }

    /// The numpy type string in little-endian order (`<f4`, `|u1`).
    pub fn numpy(self) -> &'static str {
        match self {
            Self::Bool => "|b1",
            Self::Int8 => "|i1",
            Self::Int16 => "<i2",
            Self::Int32 => "<i4",
            Self::Int64 => "<i8",
            Self::UInt8 => "|u1",
            Self::UInt16 => "<u2",
            Self::UInt32 => "<u4",
            Self::UInt64 => "<u8",
            Self::Float32 => "<f4",
            Self::Float64 => "<f8",
        }
    }

    /// Element `index` of little-endian `bytes`, as a number (booleans are 0 and 1; 64-bit
    /// integers past 2^53 round).
    pub fn value_at(self, bytes: &[u8], index: usize) -> f64 {
        let at = &bytes[index * self.size()..(index + 1) * self.size()];
        let array = |n| -> [u8; 8] {
            let mut out = [0u8; 8];
            out[..n].copy_from_slice(&at[..n]);
            out
        };
        match self {
            Self::Bool => f64::from(u8::from(at[0] != 0)),
            Self::Int8 => f64::from(at[0] as i8),
            Self::UInt8 => f64::from(at[0]),
            Self::Int16 => f64::from(i16::from_le_bytes([at[0], at[1]])),
            Self::UInt16 => f64::from(u16::from_le_bytes([at[0], at[1]])),
            Self::Int32 => f64::from(i32::from_le_bytes([at[0], at[1], at[2], at[3]])),
            Self::UInt32 => f64::from(u32::from_le_bytes([at[0], at[1], at[2], at[3]])),
            Self::Float32 => f64::from(f32::from_le_bytes([at[0], at[1], at[2], at[3]])),
            Self::Int64 => i64::from_le_bytes(array(8)) as f64,
            Self::UInt64 => u64::from_le_bytes(array(8)) as f64,
            Self::Float64 => f64::from_le_bytes(array(8)),
        }
    }

    fn is_float(self) -> bool {
        matches!(self, Self::Float32 | Self::Float64)
    }
}

impl FromStr for DataType {
    type Err = ArrayError;

    /// A Zarr v3 name, or the numpy spelling (`f4`, `<i8`, `u1`, `?`).
    fn from_str(name: &str) -> Result<Self, ArrayError> {
        let numpy = name.trim_start_matches(['<', '|', '=']);
        let by_numpy = match numpy {
            "?" | "b1" => Some(Self::Bool),
            "i1" => Some(Self::Int8),
            "i2" => Some(Self::Int16),
            "i4" => Some(Self::Int32),
            "i8" => Some(Self::Int64),
            "u1" => Some(Self::UInt8),
            "u2" => Some(Self::UInt16),
            "u4" => Some(Self::UInt32),
            "u8" => Some(Self::UInt64),
            "f4" => Some(Self::Float32),
            "f8" => Some(Self::Float64),
            _ => None,
        };
        by_numpy.or_else(|| Self::ALL.into_iter().find(|t| t.name() == name)).ok_or_else(|| {
            ArrayError::Spec(format!(
                "unsupported data type {name:?}: use one of bool, int8..int64, uint8..uint64, float32, float64"
            ))
        })
    }
}

/// How the bytes of a blosc block are shuffled before compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BloscShuffle {
    None,
    Byte,
    Bit,
}

/// A codec after the `bytes` serialisation (bytes-to-bytes in Zarr v3 terms).
#[derive(Debug, Clone, PartialEq)]
pub enum Codec {
    Zstd {
        level: i32,
        checksum: bool,
    },
    Gzip {
        level: u32,
    },
    Blosc {
        cname: String,
        clevel: u32,
        shuffle: BloscShuffle,
    },
    Crc32c,
    /// Byte shuffle by element (`numcodecs.shuffle`), as HDF5's shuffle filter: before gzip, it
    /// makes a Zarr copy compressed as an HDF5 file's `gzip + shuffle` chunks are.
    Shuffle,
}

const BLOSC_COMPRESSORS: [&str; 6] = ["blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd"];

impl FromStr for Codec {
    type Err = ArrayError;

    /// `zstd[:LEVEL]`, `gzip[:LEVEL]`, `blosc[:CNAME[:CLEVEL[:noshuffle|shuffle|bitshuffle]]]`,
    /// `crc32c`, `shuffle`.
    fn from_str(text: &str) -> Result<Self, ArrayError> {
        let mut parts = text.trim().split(':');
        let name = parts.next().unwrap_or_default().to_ascii_lowercase();
        let args: Vec<&str> = parts.collect();
        let bad = |why: &str| ArrayError::Spec(format!("codec {text:?}: {why}"));
        let number = |index: usize, default: i64, range: std::ops::RangeInclusive<i64>| -> Result<i64, ArrayError> {
            let value = args.get(index).map_or(Ok(default), |s| s.parse::<i64>().map_err(|_| bad("not a number")))?;
            if range.contains(&value) { Ok(value) } else { Err(bad(&format!("level must be in {range:?}"))) }
        };
        let codec = match name.as_str() {
            "zstd" => Codec::Zstd { level: number(0, 3, -7..=22)? as i32, checksum: false },
            "gzip" => Codec::Gzip { level: number(0, 5, 0..=9)? as u32 },
            "crc32c" => Codec::Crc32c,
            "shuffle" => Codec::Shuffle,
            "blosc" => {
                let cname = args.first().copied().unwrap_or("lz4").to_ascii_lowercase();
                if !BLOSC_COMPRESSORS.contains(&cname.as_str()) {
                    return Err(bad(&format!("blosc compressor must be one of {BLOSC_COMPRESSORS:?}")));
                }
                let shuffle = match args.get(2).copied().unwrap_or("shuffle") {
                    "noshuffle" => BloscShuffle::None,
                    "shuffle" => BloscShuffle::Byte,
                    "bitshuffle" => BloscShuffle::Bit,
                    _ => return Err(bad("blosc shuffle must be noshuffle, shuffle or bitshuffle")),
                };
                Codec::Blosc { cname, clevel: number(1, 5, 0..=9)? as u32, shuffle }
            }
            _ => return Err(bad("unknown codec: use zstd, gzip, blosc, crc32c or shuffle")),
        };
        Ok(codec)
    }
}

impl Codec {
    /// The codec's entry in `zarr.json` for elements of `element_size` bytes.
    fn metadata(&self, element_size: usize) -> Value {
        match self {
            Codec::Zstd { level, checksum } => {
                json!({"name": "zstd", "configuration": {"level": level, "checksum": checksum}})
            }
            Codec::Gzip { level } => json!({"name": "gzip", "configuration": {"level": level}}),
            Codec::Crc32c => json!({"name": "crc32c"}),
            Codec::Shuffle => json!({"name": "numcodecs.shuffle", "configuration": {"elementsize": element_size}}),
            Codec::Blosc { cname, clevel, shuffle } => {
                let shuffle = match shuffle {
                    BloscShuffle::None => "noshuffle",
                    BloscShuffle::Byte => "shuffle",
                    BloscShuffle::Bit => "bitshuffle",
                };
                json!({"name": "blosc", "configuration": {
                    "cname": cname, "clevel": clevel, "shuffle": shuffle,
                    "typesize": element_size, "blocksize": 0
                }})
            }
        }
    }
}

/// A new array. `chunk_shape` is the shape of one stored object; with `inner_chunks`, each
/// stored object is a shard of inner chunks of that shape (`sharding_indexed`) and `codecs`
/// apply to each inner chunk.
#[derive(Debug, Clone)]
pub struct ArraySpec {
    pub shape: Vec<u64>,
    pub data_type: DataType,
    pub chunk_shape: Vec<u64>,
    pub codecs: Vec<Codec>,
    pub inner_chunks: Option<Vec<u64>>,
    /// Cast to the data type; `None` is 0 (false).
    pub fill_value: Option<f64>,
    pub attributes: Map<String, Value>,
    pub dimension_names: Option<Vec<String>>,
}

impl ArraySpec {
    /// A plain array: no compression, fill value 0, no attributes.
    pub fn new(shape: Vec<u64>, data_type: DataType, chunk_shape: Vec<u64>) -> Self {
        Self {
            shape,
            data_type,
            chunk_shape,
            codecs: Vec::new(),
            inner_chunks: None,
            fill_value: None,
            attributes: Map::new(),
            dimension_names: None,
        }
    }

    /// Codecs from their short forms, comma-separated (`"zstd:3,crc32c"`; empty is none).
    pub fn parse_codecs(text: &str) -> Result<Vec<Codec>, ArrayError> {
        text.split(',').filter(|s| !s.trim().is_empty()).map(str::parse).collect()
    }

    fn check(&self) -> Result<(), ArrayError> {
        let dims = self.shape.len();
        let bad = |why: String| Err(ArrayError::Spec(why));
        if dims == 0 {
            return bad("an array needs at least one dimension".into());
        }
        if self.chunk_shape.len() != dims {
            return bad(format!("the chunk shape has {} dimensions, the array {dims}", self.chunk_shape.len()));
        }
        if self.chunk_shape.contains(&0) {
            return bad("every chunk dimension must be at least 1".into());
        }
        if let Some(inner) = &self.inner_chunks {
            if inner.len() != dims || inner.contains(&0) {
                return bad(format!("inner chunks {inner:?} must have {dims} dimensions, each at least 1"));
            }
            if let Some(d) = (0..dims).find(|&d| !self.chunk_shape[d].is_multiple_of(inner[d])) {
                return bad(format!(
                    "dimension {d}: the shard extent {} is not a multiple of the inner chunk extent {}",
                    self.chunk_shape[d], inner[d]
                ));
            }
        }
        if let Some(names) = &self.dimension_names
            && names.len() != dims
        {
            return bad(format!("{} dimension names for {dims} dimensions", names.len()));
        }
        Ok(())
    }

    fn fill_value_metadata(&self) -> Value {
        let value = self.fill_value.unwrap_or(0.0);
        match self.data_type {
            DataType::Bool => json!(value != 0.0),
            t if t.is_float() && value.is_nan() => json!("NaN"),
            t if t.is_float() && value.is_infinite() => json!(if value > 0.0 { "Infinity" } else { "-Infinity" }),
            t if t.is_float() => json!(value),
            _ => json!(value as i64),
        }
    }

    /// The array's `zarr.json`, as the Zarr v3 specification writes it.
    pub fn metadata(&self) -> Result<Value, ArrayError> {
        self.check()?;
        let size = self.data_type.size();
        let bytes = if size == 1 {
            json!({"name": "bytes"})
        } else {
            json!({"name": "bytes", "configuration": {"endian": "little"}})
        };
        let mut codecs = vec![bytes];
        codecs.extend(self.codecs.iter().map(|c| c.metadata(size)));
        let codecs = match &self.inner_chunks {
            None => codecs,
            Some(inner) => vec![json!({"name": "sharding_indexed", "configuration": {
                "chunk_shape": inner,
                "codecs": codecs,
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": "end"
            }})],
        };
        let mut metadata = json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": self.shape,
            "data_type": self.data_type.name(),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": self.chunk_shape}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": self.fill_value_metadata(),
            "codecs": codecs,
            "attributes": self.attributes,
        });
        if let Some(names) = &self.dimension_names {
            metadata["dimension_names"] = json!(names);
        }
        Ok(metadata)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs_parse_from_short_forms() {
        let codecs = ArraySpec::parse_codecs("zstd:5, gzip, blosc:zstd:7:bitshuffle,crc32c").unwrap();
        assert_eq!(codecs[0], Codec::Zstd { level: 5, checksum: false });
        assert_eq!(codecs[1], Codec::Gzip { level: 5 });
        assert_eq!(codecs[2], Codec::Blosc { cname: "zstd".into(), clevel: 7, shuffle: BloscShuffle::Bit });
        assert_eq!(codecs[3], Codec::Crc32c);
        for bad in ["lzma", "gzip:12", "blosc:foo", "zstd:x", "blosc:lz4:5:sideways"] {
            assert!(ArraySpec::parse_codecs(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn data_types_parse_from_zarr_and_numpy_names() {
        assert_eq!("float32".parse::<DataType>().unwrap(), DataType::Float32);
        assert_eq!("<f8".parse::<DataType>().unwrap(), DataType::Float64);
        assert_eq!("|u1".parse::<DataType>().unwrap(), DataType::UInt8);
        assert!("complex64".parse::<DataType>().is_err());
    }

    #[test]
    fn sharded_metadata_nests_the_codecs() {
        let mut spec = ArraySpec::new(vec![10, 10], DataType::Int16, vec![4, 4]);
        spec.codecs = vec![Codec::Zstd { level: 1, checksum: false }];
        spec.inner_chunks = Some(vec![2, 2]);
        let metadata = spec.metadata().unwrap();
        let sharding = &metadata["codecs"][0];
        assert_eq!(sharding["name"], "sharding_indexed");
        assert_eq!(sharding["configuration"]["codecs"][1]["name"], "zstd");
        spec.inner_chunks = Some(vec![3, 2]);
        assert!(spec.metadata().is_err(), "a shard that is not a multiple of its inner chunks");
    }
}
