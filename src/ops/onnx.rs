//! ONNX Runtime for the model stages (`clip_embed`, `image_model`, `embedding_head`,
//! `nsfw_score`, `text_model`), through `ort` with `load-dynamic`: the shared library
//! is the one the PyPI `onnxruntime` wheel (CPU) or `onnxruntime-gpu` wheel (CUDA) ships, named by the stage's `library` param or
//! `ORT_DYLIB_PATH`. One library per process (ONNX Runtime's environment is global);
//! one session per model, shared by the tasks of the process.
use super::ModelError;
use ort::session::Session;
use ort::value::{Tensor, TensorElementType, ValueType};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// Where a model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Cpu,
    Cuda { device: i32 },
}

/// The runtime settings a model stage takes as params.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeParams {
    /// `params.library`, else `ORT_DYLIB_PATH`.
    pub library: Option<String>,
    pub provider: Provider,
    /// Intra-op threads (0: ONNX Runtime's default, one per core).
    pub threads: usize,
}

impl RuntimeParams {
    /// From the declared params (`library`, `provider`: `cpu` | `cuda`, `device`,
    /// `threads`); an unknown provider is an error at `params.provider`.
    pub fn from_params(
        p: &super::model_params::OnnxRuntimeParams,
        o: &crate::spec::reader::Obj,
    ) -> RuntimeParams {
        let provider = match p.provider.as_str() {
            "cpu" => Provider::Cpu,
            "cuda" => Provider::Cuda {
                device: p.device as i32,
            },
            other => {
                o.error(
                    "provider",
                    format!("unknown execution provider {other:?}, expected cpu or cuda"),
                );
                Provider::Cpu
            }
        };
        RuntimeParams {
            library: p.library.clone(),
            provider,
            threads: p.threads,
        }
    }
}

static ENV: OnceLock<Result<(PathBuf, ort::environment::Environment), String>> = OnceLock::new();

/// Loads ONNX Runtime from `library` (or `ORT_DYLIB_PATH`) once per process.
pub fn environment(
    library: Option<&str>,
) -> Result<&'static ort::environment::Environment, ModelError> {
    environment_at(library).map_err(ModelError::Runtime)
}

fn environment_at(library: Option<&str>) -> Result<&'static ort::environment::Environment, String> {
    let want = match library {
        Some(l) => PathBuf::from(l),
        None => match std::env::var_os("ORT_DYLIB_PATH") {
            Some(p) => PathBuf::from(p),
            None => {
                return Err(
                    "no ONNX Runtime library: set ORT_DYLIB_PATH or params.library to the \
                     libonnxruntime.so of the PyPI onnxruntime (or onnxruntime-gpu) wheel"
                        .into(),
                );
            }
        },
    };
    let got = ENV.get_or_init(|| {
        if !want.is_file() {
            return Err(format!(
                "ONNX Runtime library {} does not exist",
                want.display()
            ));
        }
        let env = ort::init_from(&want)
            .map_err(|e| format!("loading ONNX Runtime from {}: {e}", want.display()))?
            .with_name("mdf")
            .build()
            .map_err(|e| format!("starting ONNX Runtime from {}: {e}", want.display()))?;
        Ok((want.clone(), env))
    });
    match got {
        Err(e) => Err(e.clone()),
        Ok((p, _)) if p != &want => Err(format!(
            "ONNX Runtime is already loaded from {} in this process; {} was asked for (use one library per worker)",
            p.display(),
            want.display()
        )),
        Ok((_, env)) => Ok(env),
    }
}

/// One model: a session, its (single) input and the output it is read from (the
/// first, or one chosen by name).
pub struct Model {
    session: Mutex<Session>,
    input: String,
    output: String,
    /// The input element type: f32, f16 or i64.
    pub input_type: TensorElementType,
    /// The input shape, −1 for dynamic dimensions.
    pub input_shape: Vec<i64>,
    /// The output shape, −1 for dynamic dimensions.
    pub output_shape: Vec<i64>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("input", &self.input)
            .field("input_type", &self.input_type)
            .field("input_shape", &self.input_shape)
            .finish()
    }
}

fn tensor_info(v: &ValueType) -> Option<(TensorElementType, Vec<i64>)> {
    match v {
        ValueType::Tensor { ty, shape, .. } => Some((*ty, shape.iter().copied().collect())),
        _ => None,
    }
}

impl Model {
    /// A session for the ONNX model in `bytes` (`what` names it in errors).
    pub fn load(bytes: &[u8], rt: &RuntimeParams, what: &str) -> Result<Model, ModelError> {
        Model::load_io(bytes, rt, what, None, None)
    }

    /// [`Model::load`], checking that its one input is named `input` (the error names
    /// `params.input`) and reading the output named `output` (`params.output`).
    pub fn load_io(
        bytes: &[u8],
        rt: &RuntimeParams,
        what: &str,
        want_input: Option<&str>,
        want_output: Option<&str>,
    ) -> Result<Model, ModelError> {
        let session = session(bytes, rt, what)?;
        let bad = |m: String| ModelError::Model(format!("{what}: {m}"));
        let names = |v: &[ort::value::Outlet]| {
            v.iter()
                .map(|o| format!("{:?}", o.name()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Some(want) = want_input
            && !session.inputs().iter().any(|i| i.name() == want)
        {
            return Err(ModelError::Model(format!(
                "params.input is {want:?}, but {what} has no such input (its inputs: {})",
                names(session.inputs())
            )));
        }
        let [input] = session.inputs() else {
            return Err(bad(format!(
                "expected a model with one input, found {} ({}); mdf feeds one tensor",
                session.inputs().len(),
                names(session.inputs())
            )));
        };
        let (input_type, input_shape) =
            tensor_info(input.dtype()).ok_or_else(|| bad("the input is not a tensor".into()))?;
        let output = match want_output {
            None => session
                .outputs()
                .first()
                .ok_or_else(|| bad("the model has no output".into()))?,
            Some(want) => session
                .outputs()
                .iter()
                .find(|o| o.name() == want)
                .ok_or_else(|| {
                    ModelError::Model(format!(
                        "params.output is {want:?}, but {what} has no such output (its \
                         outputs: {})",
                        names(session.outputs())
                    ))
                })?,
        };
        let (_, output_shape) = tensor_info(output.dtype())
            .ok_or_else(|| bad(format!("the output {:?} is not a tensor", output.name())))?;
        Ok(Model {
            output: output.name().to_string(),
            input: input.name().to_string(),
            input_type,
            input_shape,
            output_shape,
            session: Mutex::new(session),
        })
    }

    /// Runs a float input of `shape` (converted to f16 when the model takes f16);
    /// returns the first output as f32 with its shape.
    pub fn run_f32(
        &self,
        data: Vec<f32>,
        shape: &[usize],
    ) -> Result<(Vec<usize>, Vec<f32>), ModelError> {
        let shape = shape.to_vec();
        let value: ort::value::DynValue = match self.input_type {
            TensorElementType::Float32 => Tensor::from_array((shape, data))
                .map_err(inference)?
                .into_dyn(),
            TensorElementType::Float16 => {
                // A 256-image batch at 224² is 38.5M values: converted on every core,
                // with F16C where the CPU has it (half's slice conversion).
                use half::slice::HalfFloatSliceExt;
                use rayon::prelude::*;
                let mut h = vec![half::f16::ZERO; data.len()];
                h.par_chunks_mut(1 << 16)
                    .zip(data.par_chunks(1 << 16))
                    .for_each(|(d, s)| d.convert_from_f32_slice(s));
                Tensor::from_array((shape, h))
                    .map_err(inference)?
                    .into_dyn()
            }
            other => {
                return Err(ModelError::Model(format!(
                    "the model takes {other:?}, not float input"
                )));
            }
        };
        self.run(value)
    }

    /// Runs token ids, as int64 or int32 as the model takes them.
    pub fn run_ids(
        &self,
        data: Vec<i64>,
        shape: &[usize],
    ) -> Result<(Vec<usize>, Vec<f32>), ModelError> {
        let shape = shape.to_vec();
        let value: ort::value::DynValue = match self.input_type {
            TensorElementType::Int64 => Tensor::from_array((shape, data))
                .map_err(inference)?
                .into_dyn(),
            TensorElementType::Int32 => {
                let v: Vec<i32> = data.into_iter().map(|x| x as i32).collect();
                Tensor::from_array((shape, v))
                    .map_err(inference)?
                    .into_dyn()
            }
            other => {
                return Err(ModelError::Model(format!(
                    "the model takes {other:?}, not token ids"
                )));
            }
        };
        self.run(value)
    }

    fn run(&self, value: ort::value::DynValue) -> Result<(Vec<usize>, Vec<f32>), ModelError> {
        // A panic while the lock was held (a hostile record, quarantined by the
        // worker) leaves no half-updated state in the session: keep using it.
        let mut s = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let out = s
            .run(ort::inputs![self.input.as_str() => value])
            .map_err(|e| ModelError::Inference(format!("inference: {e}")))?;
        let o = &out[self.output.as_str()];
        if let Ok((shape, v)) = o.try_extract_tensor::<f32>() {
            return Ok((shape.iter().map(|&d| d as usize).collect(), v.to_vec()));
        }
        let (shape, v) = o.try_extract_tensor::<half::f16>().map_err(|e| {
            ModelError::Inference(format!("the output is neither f32 nor f16: {e}"))
        })?;
        Ok((
            shape.iter().map(|&d| d as usize).collect(),
            v.iter().map(|x| x.to_f32()).collect(),
        ))
    }
}

fn inference(e: ort::Error) -> ModelError {
    ModelError::Inference(e.to_string())
}

/// Per-record model inputs (each the same length, or why the record has none) as one
/// batch tensor, and per record its row in it.
pub fn stack<E>(per: Vec<Result<Vec<f32>, E>>) -> (Vec<f32>, Vec<Result<usize, E>>) {
    let size = per.iter().flatten().map(Vec::len).next().unwrap_or(0);
    let mut data = Vec::with_capacity(per.len() * size);
    let mut n = 0;
    let rows = per
        .into_iter()
        .map(|r| {
            r.map(|t| {
                data.extend_from_slice(&t);
                n += 1;
                n - 1
            })
        })
        .collect();
    (data, rows)
}

/// A session for the ONNX model in `bytes` on `rt`'s library and provider (`what`
/// names it in errors): threads, the CUDA provider (refused when the library has
/// none), the model parsed. Every model stage's session starts here.
pub fn session(bytes: &[u8], rt: &RuntimeParams, what: &str) -> Result<Session, ModelError> {
    let env = environment(rt.library.as_deref())?;
    let err = |e: ort::Error| ModelError::Runtime(format!("{what}: {e}"));
    let mut b = Session::builder(env).map_err(err)?;
    if rt.threads > 0 {
        b = b
            .with_intra_threads(rt.threads)
            .map_err(|e| ModelError::Runtime(format!("{what}: {e}")))?;
    }
    if let Provider::Cuda { device } = rt.provider {
        use ort::ep::ExecutionProvider;
        let cuda = ort::ep::CUDA::default().with_device_id(device);
        if !ort::ep::CUDA::is_available().unwrap_or(false) {
            return Err(ModelError::Runtime(format!(
                "{what}: params.provider is cuda, but the ONNX Runtime library has no CUDA \
                 execution provider (install the onnxruntime-gpu wheel and point \
                 ORT_DYLIB_PATH at its libonnxruntime.so)"
            )));
        }
        b = b
            .with_execution_providers([cuda.build().error_on_failure()])
            .map_err(|e| {
                ModelError::Runtime(format!(
                    "{what}: params.provider is cuda, but CUDA could not be used: {e}"
                ))
            })?;
    }
    b.commit_from_memory(bytes)
        .map_err(|e| ModelError::Model(format!("{what}: not a model ONNX Runtime can load: {e}")))
}

/// A tensor a model takes or returns: name, element type, shape (−1: dynamic).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    pub name: String,
    pub ty: TensorElementType,
    pub shape: Vec<i64>,
}

/// A model with several named inputs and outputs (a text encoder's `input_ids`,
/// `attention_mask`, `token_type_ids`): integer inputs in, one float output read.
pub struct Graph {
    session: Mutex<Session>,
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish()
    }
}

impl Graph {
    /// Loads the model and lists its inputs and outputs; a non-tensor input or output
    /// is an error.
    pub fn load(bytes: &[u8], rt: &RuntimeParams, what: &str) -> Result<Graph, ModelError> {
        let s = session(bytes, rt, what)?;
        let spec = |name: &str, v: &ValueType| {
            tensor_info(v)
                .map(|(ty, shape)| TensorSpec {
                    name: name.to_string(),
                    ty,
                    shape,
                })
                .ok_or_else(|| ModelError::Model(format!("{what}: {name:?} is not a tensor")))
        };
        let inputs = s
            .inputs()
            .iter()
            .map(|i| spec(i.name(), i.dtype()))
            .collect::<Result<_, _>>()?;
        let outputs = s
            .outputs()
            .iter()
            .map(|o| spec(o.name(), o.dtype()))
            .collect::<Result<_, _>>()?;
        Ok(Graph {
            session: Mutex::new(s),
            inputs,
            outputs,
        })
    }

    /// Runs integer inputs of one `shape` each (converted to the input's declared
    /// int64 or int32) and returns output `output` as f32 with its shape.
    pub fn run_ints(
        &self,
        feeds: Vec<(&str, Vec<i64>)>,
        shape: &[usize],
        output: &str,
    ) -> Result<(Vec<usize>, Vec<f32>), ModelError> {
        let mut values: Vec<(String, ort::value::DynValue)> = Vec::with_capacity(feeds.len());
        for (name, data) in feeds {
            let ty = self
                .inputs
                .iter()
                .find(|i| i.name == name)
                .map(|i| i.ty)
                .ok_or_else(|| ModelError::Model(format!("the model has no input {name:?}")))?;
            let v = match ty {
                TensorElementType::Int64 => Tensor::from_array((shape.to_vec(), data))
                    .map_err(inference)?
                    .into_dyn(),
                TensorElementType::Int32 => {
                    let d: Vec<i32> = data.into_iter().map(|x| x as i32).collect();
                    Tensor::from_array((shape.to_vec(), d))
                        .map_err(inference)?
                        .into_dyn()
                }
                other => {
                    return Err(ModelError::Model(format!(
                        "input {name:?} is {other:?}, expected int64 or int32"
                    )));
                }
            };
            values.push((name.to_string(), v));
        }
        // As in `Model::run`: a poisoned lock left no half-updated session.
        let mut s = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let out = s
            .run(values)
            .map_err(|e| ModelError::Inference(format!("inference: {e}")))?;
        let o = out
            .get(output)
            .ok_or_else(|| ModelError::Inference(format!("the model returned no {output:?}")))?;
        if let Ok((shape, v)) = o.try_extract_tensor::<f32>() {
            return Ok((shape.iter().map(|&d| d as usize).collect(), v.to_vec()));
        }
        let (shape, v) = o.try_extract_tensor::<half::f16>().map_err(|e| {
            ModelError::Inference(format!("output {output:?} is neither f32 nor f16: {e}"))
        })?;
        Ok((
            shape.iter().map(|&d| d as usize).collect(),
            v.iter().map(|x| x.to_f32()).collect(),
        ))
    }
}
