//! Every `aclError` status code, with its symbolic name.
//!
//! Two layers report through `aclError` (api-facts A.11): the ACL layer
//! (`acl/acl_base_rt.h`, `static const int`, 100000–500005) and the runtime layer
//! (`acl/error_codes/rt_error_codes.h`, `#define`, 107000–507916). Every code is a
//! `pub const` here, and [`error_name`] turns a number back into its name for the
//! backend's checked-call helper, which builds `Error::Vendor { code, name, .. }`; the
//! emulator returns these same numbers. The list follows the torch-npu 2.14.0 headers
//! plus `ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED` from the newer CANN runtime header; the
//! model-compiler (GE) codes of `ge_error_codes.h` are left out, devipc never calls GE.
//!
//! How codes arise in the IPC paths (api-facts A.11): NULL or reserved-parameter checks in
//! the ACL wrappers give [`ACL_ERROR_INVALID_PARAM`]; runtime validation gives
//! [`ACL_ERROR_RT_PARAM_INVALID`]; a thread without a device context gives
//! [`ACL_ERROR_RT_CONTEXT_NULL`]; a chip without the feature gives
//! [`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`]; and driver errors without their own mapping
//! (often trustlist failures) surface as [`ACL_ERROR_RT_DRV_INTERNAL_ERROR`].

use std::mem::size_of;

use crate::abi::{ConstDecl, ConstKind};
use crate::types::aclError;

/// Generates the code constants, [`error_name`], [`error_description`] and the
/// [`ConstDecl`] records. A duplicated code among the primary names is a compile error
/// (`unreachable_patterns` is denied in the generated match).
macro_rules! acl_codes {
    (
        acl_layer { $( $aname:ident = $avalue:literal, $adesc:literal; )* }
        runtime_layer { $( $rname:ident = $rvalue:literal, $rdesc:literal; )* }
        aliases { $( $kind:ident $alias:ident = $target:ident; )* }
    ) => {
        $(
            #[doc = concat!("`", stringify!($avalue), "`: ", $adesc, " (ACL layer, `acl_base_rt.h`).")]
            pub const $aname: aclError = $avalue;
        )*
        $(
            #[doc = concat!("`", stringify!($rvalue), "`: ", $rdesc, " (runtime layer, `rt_error_codes.h`).")]
            pub const $rname: aclError = $rvalue;
        )*
        $(
            #[doc = concat!("Alias of [`", stringify!($target), "`], declared by the headers under this name too.")]
            pub const $alias: aclError = $target;
        )*

        /// The symbolic name of an ACL status code, e.g. `107017` ->
        /// `"ACL_ERROR_RT_INVALID_HANDLE"`; `None` for a code this crate does not know
        /// (a newer runtime's). `0` is `"ACL_SUCCESS"`.
        #[deny(unreachable_patterns)]
        pub fn error_name(code: aclError) -> Option<&'static str> {
            Some(match code {
                $( $avalue => stringify!($aname), )*
                $( $rvalue => stringify!($rname), )*
                _ => return None,
            })
        }

        /// A short English description of an ACL status code, for messages when the
        /// runtime's own `aclGetRecentErrMsg` is empty; `None` for an unknown code.
        pub fn error_description(code: aclError) -> Option<&'static str> {
            Some(match code {
                $( $avalue => $adesc, )*
                $( $rvalue => $rdesc, )*
                _ => return None,
            })
        }

        /// Every primary `(code, name)` pair, ACL layer then runtime layer, ascending.
        pub const ALL_CODES: &[(aclError, &str)] = &[
            $( ($avalue, stringify!($aname)), )*
            $( ($rvalue, stringify!($rname)), )*
        ];

        /// Records of every code constant, for the ABI check.
        pub(crate) const CODE_DECLS: &[ConstDecl] = &[
            $( code_decl(stringify!($aname), $avalue, ConstKind::StaticConst), )*
            $( code_decl(stringify!($rname), $rvalue, ConstKind::Macro), )*
            $( code_decl(stringify!($alias), $target, ConstKind::$kind), )*
        ];
    };
}

/// One [`ConstDecl`] of an `aclError` code.
const fn code_decl(name: &'static str, value: aclError, kind: ConstKind) -> ConstDecl {
    ConstDecl {
        name,
        value: value as i128,
        rust_type: "aclError",
        size: size_of::<aclError>(),
        signed: true,
        kind,
    }
}

acl_codes! {
    acl_layer {
        ACL_SUCCESS = 0, "success";
        ACL_ERROR_INVALID_PARAM = 100000, "invalid parameter (NULL pointer, reserved argument not 0, ...)";
        ACL_ERROR_UNINITIALIZE = 100001, "ACL is not initialized: call aclInit first";
        ACL_ERROR_REPEAT_INITIALIZE = 100002, "aclInit called again (the call still counts)";
        ACL_ERROR_INVALID_FILE = 100003, "invalid file";
        ACL_ERROR_WRITE_FILE = 100004, "writing a file failed";
        ACL_ERROR_INVALID_FILE_SIZE = 100005, "invalid file size";
        ACL_ERROR_PARSE_FILE = 100006, "parsing a file failed";
        ACL_ERROR_FILE_MISSING_ATTR = 100007, "file is missing an attribute";
        ACL_ERROR_FILE_ATTR_INVALID = 100008, "file attribute is invalid";
        ACL_ERROR_INVALID_DUMP_CONFIG = 100009, "invalid dump configuration";
        ACL_ERROR_INVALID_PROFILING_CONFIG = 100010, "invalid profiling configuration";
        ACL_ERROR_INVALID_MODEL_ID = 100011, "invalid model id";
        ACL_ERROR_DESERIALIZE_MODEL = 100012, "deserializing a model failed";
        ACL_ERROR_PARSE_MODEL = 100013, "parsing a model failed";
        ACL_ERROR_READ_MODEL_FAILURE = 100014, "reading a model failed";
        ACL_ERROR_MODEL_SIZE_INVALID = 100015, "invalid model size";
        ACL_ERROR_MODEL_MISSING_ATTR = 100016, "model is missing an attribute";
        ACL_ERROR_MODEL_INPUT_NOT_MATCH = 100017, "model input does not match";
        ACL_ERROR_MODEL_OUTPUT_NOT_MATCH = 100018, "model output does not match";
        ACL_ERROR_MODEL_NOT_DYNAMIC = 100019, "model is not dynamic";
        ACL_ERROR_OP_TYPE_NOT_MATCH = 100020, "operator type does not match";
        ACL_ERROR_OP_INPUT_NOT_MATCH = 100021, "operator input does not match";
        ACL_ERROR_OP_OUTPUT_NOT_MATCH = 100022, "operator output does not match";
        ACL_ERROR_OP_ATTR_NOT_MATCH = 100023, "operator attribute does not match";
        ACL_ERROR_OP_NOT_FOUND = 100024, "operator not found";
        ACL_ERROR_OP_LOAD_FAILED = 100025, "loading an operator failed";
        ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100026, "unsupported data type";
        ACL_ERROR_FORMAT_NOT_MATCH = 100027, "format does not match";
        ACL_ERROR_BIN_SELECTOR_NOT_REGISTERED = 100028, "binary selector not registered";
        ACL_ERROR_KERNEL_NOT_FOUND = 100029, "kernel not found";
        ACL_ERROR_BIN_SELECTOR_ALREADY_REGISTERED = 100030, "binary selector already registered";
        ACL_ERROR_KERNEL_ALREADY_REGISTERED = 100031, "kernel already registered";
        ACL_ERROR_INVALID_QUEUE_ID = 100032, "invalid queue id";
        ACL_ERROR_REPEAT_SUBSCRIBE = 100033, "repeated subscription";
        ACL_ERROR_STREAM_NOT_SUBSCRIBE = 100034, "stream not subscribed";
        ACL_ERROR_THREAD_NOT_SUBSCRIBE = 100035, "thread not subscribed";
        ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036, "waiting for a callback timed out";
        ACL_ERROR_REPEAT_FINALIZE = 100037, "aclFinalize called again";
        ACL_ERROR_NOT_STATIC_AIPP = 100038, "not a static AIPP configuration";
        ACL_ERROR_COMPILING_STUB_MODE = 100039, "compiling against the stub library";
        ACL_ERROR_GROUP_NOT_SET = 100040, "group not set";
        ACL_ERROR_GROUP_NOT_CREATE = 100041, "group not created";
        ACL_ERROR_PROF_ALREADY_RUN = 100042, "profiling already running";
        ACL_ERROR_PROF_NOT_RUN = 100043, "profiling not running";
        ACL_ERROR_DUMP_ALREADY_RUN = 100044, "dump already running";
        ACL_ERROR_DUMP_NOT_RUN = 100045, "dump not running";
        ACL_ERROR_PROF_REPEAT_SUBSCRIBE = 148046, "repeated profiling subscription";
        ACL_ERROR_PROF_API_CONFLICT = 148047, "conflicting profiling APIs";
        ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG = 148048, "invalid maximum operator queue configuration";
        ACL_ERROR_INVALID_OPP_PATH = 148049, "invalid operator package path";
        ACL_ERROR_OP_UNSUPPORTED_DYNAMIC = 148050, "operator does not support dynamic shapes";
        ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED = 148051, "related resources not cleared";
        ACL_ERROR_UNSUPPORTED_JPEG = 148052, "unsupported JPEG";
        ACL_ERROR_INVALID_BUNDLE_MODEL_ID = 148053, "invalid bundle model id";
        ACL_ERROR_BAD_ALLOC = 200000, "memory allocation failed";
        ACL_ERROR_API_NOT_SUPPORT = 200001, "API not supported";
        ACL_ERROR_INVALID_DEVICE = 200002, "invalid device (being replaced by ACL_ERROR_RT_INVALID_DEVICEID)";
        ACL_ERROR_MEMORY_ADDRESS_UNALIGNED = 200003, "memory address not aligned";
        ACL_ERROR_RESOURCE_NOT_MATCH = 200004, "resources do not match";
        ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005, "invalid resource handle";
        ACL_ERROR_FEATURE_UNSUPPORTED = 200006, "feature not supported";
        ACL_ERROR_PROF_MODULES_UNSUPPORTED = 200007, "profiling modules not supported";
        ACL_ERROR_STORAGE_OVER_LIMIT = 300000, "storage over limit";
        ACL_ERROR_INTERNAL_ERROR = 500000, "internal error";
        ACL_ERROR_FAILURE = 500001, "failure";
        ACL_ERROR_GE_FAILURE = 500002, "graph engine failure";
        ACL_ERROR_RT_FAILURE = 500003, "runtime failure";
        ACL_ERROR_DRV_FAILURE = 500004, "driver failure";
        ACL_ERROR_PROFILING_FAILURE = 500005, "profiling failure";
    }
    runtime_layer {
        ACL_ERROR_RT_PARAM_INVALID = 107000, "parameter invalid (runtime validation)";
        ACL_ERROR_RT_INVALID_DEVICEID = 107001, "invalid device id";
        ACL_ERROR_RT_CONTEXT_NULL = 107002, "no current context: aclrtSetDevice was not called on this thread";
        ACL_ERROR_RT_STREAM_CONTEXT = 107003, "stream not in the current context";
        ACL_ERROR_RT_MODEL_CONTEXT = 107004, "model not in the current context";
        ACL_ERROR_RT_STREAM_MODEL = 107005, "stream not in the model";
        ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006, "event timestamp invalid";
        ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL = 107007, "event timestamp reversal";
        ACL_ERROR_RT_ADDR_UNALIGNED = 107008, "memory address unaligned";
        ACL_ERROR_RT_FILE_OPEN = 107009, "opening a file failed";
        ACL_ERROR_RT_FILE_WRITE = 107010, "writing a file failed";
        ACL_ERROR_RT_STREAM_SUBSCRIBE = 107011, "stream subscription error";
        ACL_ERROR_RT_THREAD_SUBSCRIBE = 107012, "thread subscription error";
        ACL_ERROR_RT_GROUP_NOT_SET = 107013, "group not set";
        ACL_ERROR_RT_GROUP_NOT_CREATE = 107014, "group not created";
        ACL_ERROR_RT_STREAM_NO_CB_REG = 107015, "no callback registered on the stream";
        ACL_ERROR_RT_INVALID_MEMORY_TYPE = 107016, "invalid memory type";
        ACL_ERROR_RT_INVALID_HANDLE = 107017, "invalid handle";
        ACL_ERROR_RT_INVALID_MALLOC_TYPE = 107018, "invalid malloc type";
        ACL_ERROR_RT_WAIT_TIMEOUT = 107019, "wait timed out";
        ACL_ERROR_RT_TASK_TIMEOUT = 107020, "task timed out";
        ACL_ERROR_RT_SYSPARAMOPT_NOT_SET = 107021, "system parameter option not set";
        ACL_ERROR_RT_DEVICE_TASK_ABORT = 107022, "device task aborting";
        ACL_ERROR_RT_STREAM_ABORT = 107023, "stream aborting";
        ACL_ERROR_RT_CAPTURE_DEPENDENCY = 107024, "capture dependency failure";
        ACL_ERROR_RT_STREAM_UNJOINED = 107025, "invalid capture model (unjoined stream)";
        ACL_ERROR_RT_MODEL_CAPTURED = 107026, "model is captured";
        ACL_ERROR_RT_STREAM_CAPTURED = 107027, "stream is captured";
        ACL_ERROR_RT_EVENT_CAPTURED = 107028, "event is captured";
        ACL_ERROR_RT_STREAM_NOT_CAPTURED = 107029, "stream is not capturing";
        ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT = 107030, "operation not supported while the stream is captured";
        ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT = 107031, "disallowed implicit dependency on the default stream";
        ACL_ERROR_STREAM_CAPTURE_CONFLICT = 107032, "interdependent streams cannot begin capture together";
        ACL_ERROR_STREAM_TASK_GROUP_STATUS = 107033, "task group status error";
        ACL_ERROR_STREAM_TASK_GROUP_INTR = 107034, "task group interrupted";
        ACL_ERROR_RT_TASK_ABORT_STOP = 107035, "device task abort stopped before post-processing";
        ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED = 107036, "capture was not begun on this stream";
        ACL_ERROR_RT_MODEL_RUNNING = 107037, "model is still running";
        ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD = 107038, "capture ended on another thread than it began";
        ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY = 107039, "input array too small";
        ACL_ERROR_RT_MODEL_UPDATE_FAILED = 107040, "model update failed";
        ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC = 107041, "asynchronous operation turned synchronous, not allowed while captured";
        ACL_ERROR_RT_SYMBOL_NOT_FOUND = 107042, "symbol not found";
        ACL_ERROR_RT_INVALID_SYMBOL = 107043, "invalid device symbol";
        ACL_ERROR_RT_INVALID_DEVICE_FUNCTION = 107044, "invalid device function";
        ACL_ERROR_RT_STREAM_NOT_SUPPORT_OPERA = 107045, "operation not supported on this stream";
        ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING = 107046, "sub-graph is capturing";
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000, "feature not supported (on this chip or driver)";
        ACL_ERROR_RT_MEMORY_ALLOCATION = 207001, "out of memory";
        ACL_ERROR_RT_MEMORY_FREE = 207002, "freeing memory failed";
        ACL_ERROR_RT_AICORE_OVER_FLOW = 207003, "AI Core overflow";
        ACL_ERROR_RT_NO_DEVICE = 207004, "no device";
        ACL_ERROR_RT_RESOURCE_ALLOC_FAIL = 207005, "resource allocation failed";
        ACL_ERROR_RT_NO_PERMISSION = 207006, "no permission";
        ACL_ERROR_RT_NO_EVENT_RESOURCE = 207007, "no event resources left";
        ACL_ERROR_RT_NO_STREAM_RESOURCE = 207008, "no stream resources left";
        ACL_ERROR_RT_NO_NOTIFY_RESOURCE = 207009, "no notify resources left";
        ACL_ERROR_RT_NO_MODEL_RESOURCE = 207010, "no model resources left";
        ACL_ERROR_RT_NO_CDQ_RESOURCE = 207011, "no CDQ resources left";
        ACL_ERROR_RT_OVER_LIMIT = 207012, "over limit";
        ACL_ERROR_RT_QUEUE_EMPTY = 207013, "queue is empty";
        ACL_ERROR_RT_QUEUE_FULL = 207014, "queue is full";
        ACL_ERROR_RT_REPEATED_INIT = 207015, "repeated initialization";
        ACL_ERROR_RT_AIVEC_OVER_FLOW = 207016, "AI Vector overflow";
        ACL_ERROR_RT_OVER_FLOW = 207017, "overflow";
        ACL_ERROR_RT_DEVICE_OOM = 207018, "device out of memory";
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP = 207019, "updating this operator is not supported";
        ACL_ERROR_RT_TIMEOUT = 207020, "driver timeout";
        ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED = 207021, "link type not supported (newer CANN runtime headers only)";
        ACL_ERROR_RT_INTERNAL_ERROR = 507000, "runtime internal error";
        ACL_ERROR_RT_TS_ERROR = 507001, "task scheduler internal error";
        ACL_ERROR_RT_STREAM_TASK_FULL = 507002, "stream task queue full";
        ACL_ERROR_RT_STREAM_TASK_EMPTY = 507003, "stream task queue empty";
        ACL_ERROR_RT_STREAM_NOT_COMPLETE = 507004, "stream not complete";
        ACL_ERROR_RT_END_OF_SEQUENCE = 507005, "end of sequence";
        ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006, "event not complete";
        ACL_ERROR_RT_CONTEXT_RELEASE_ERROR = 507007, "context release error";
        ACL_ERROR_RT_SOC_VERSION = 507008, "SoC version error";
        ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT = 507009, "task type not supported";
        ACL_ERROR_RT_LOST_HEARTBEAT = 507010, "task scheduler lost heartbeat";
        ACL_ERROR_RT_MODEL_EXECUTE = 507011, "model execution failed";
        ACL_ERROR_RT_REPORT_TIMEOUT = 507012, "report timeout";
        ACL_ERROR_RT_SYS_DMA = 507013, "system DMA error";
        ACL_ERROR_RT_AICORE_TIMEOUT = 507014, "AI Core timeout";
        ACL_ERROR_RT_AICORE_EXCEPTION = 507015, "AI Core exception";
        ACL_ERROR_RT_AICORE_TRAP_EXCEPTION = 507016, "AI Core trap exception";
        ACL_ERROR_RT_AICPU_TIMEOUT = 507017, "AI CPU timeout";
        ACL_ERROR_RT_AICPU_EXCEPTION = 507018, "AI CPU exception";
        ACL_ERROR_RT_AICPU_DATADUMP_RSP_ERR = 507019, "AI CPU data dump response error";
        ACL_ERROR_RT_AICPU_MODEL_RSP_ERR = 507020, "AI CPU model operation response error";
        ACL_ERROR_RT_PROFILING_ERROR = 507021, "profiling error";
        ACL_ERROR_RT_IPC_ERROR = 507022, "IPC error";
        ACL_ERROR_RT_MODEL_ABORT_NORMAL = 507023, "model aborted normally";
        ACL_ERROR_RT_KERNEL_UNREGISTERING = 507024, "kernel unregistering";
        ACL_ERROR_RT_RINGBUFFER_NOT_INIT = 507025, "ring buffer not initialized";
        ACL_ERROR_RT_RINGBUFFER_NO_DATA = 507026, "ring buffer has no data";
        ACL_ERROR_RT_KERNEL_LOOKUP = 507027, "kernel lookup error";
        ACL_ERROR_RT_KERNEL_DUPLICATE = 507028, "kernel registered twice";
        ACL_ERROR_RT_DEBUG_REGISTER_FAIL = 507029, "debug registration failed";
        ACL_ERROR_RT_DEBUG_UNREGISTER_FAIL = 507030, "debug unregistration failed";
        ACL_ERROR_RT_LABEL_CONTEXT = 507031, "label not in the current context";
        ACL_ERROR_RT_PROGRAM_USE_OUT = 507032, "program registrations used up";
        ACL_ERROR_RT_DEV_SETUP_ERROR = 507033, "device setup error";
        ACL_ERROR_RT_VECTOR_CORE_TIMEOUT = 507034, "vector core timeout";
        ACL_ERROR_RT_VECTOR_CORE_EXCEPTION = 507035, "vector core exception";
        ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION = 507036, "vector core trap exception";
        ACL_ERROR_RT_CDQ_BATCH_ABNORMAL = 507037, "CDQ batch allocation abnormal";
        ACL_ERROR_RT_DIE_MODE_CHANGE_ERROR = 507038, "die mode cannot be changed";
        ACL_ERROR_RT_DIE_SET_ERROR = 507039, "single-die mode cannot set a die";
        ACL_ERROR_RT_INVALID_DIEID = 507040, "invalid die id";
        ACL_ERROR_RT_DIE_MODE_NOT_SET = 507041, "die mode not set";
        ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW = 507042, "AI Core trap read overflow";
        ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW = 507043, "AI Core trap write overflow";
        ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW = 507044, "vector core trap read overflow";
        ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW = 507045, "vector core trap write overflow";
        ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046, "stream synchronization timed out";
        ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507047, "event synchronization timed out";
        ACL_ERROR_RT_FFTS_PLUS_TIMEOUT = 507048, "FFTS+ timeout";
        ACL_ERROR_RT_FFTS_PLUS_EXCEPTION = 507049, "FFTS+ exception";
        ACL_ERROR_RT_FFTS_PLUS_TRAP_EXCEPTION = 507050, "FFTS+ trap exception";
        ACL_ERROR_RT_SEND_MSG = 507051, "sending an HDC message failed";
        ACL_ERROR_RT_COPY_DATA = 507052, "copying data failed";
        ACL_ERROR_RT_DEVICE_MEM_ERROR = 507053, "device memory error";
        ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR = 507054, "HBM multi-bit ECC error";
        ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR = 507055, "suspected device memory error";
        ACL_ERROR_RT_LINK_ERROR = 507056, "link error";
        ACL_ERROR_RT_SUSPECT_REMOTE_ERROR = 507057, "suspected remote error";
        ACL_ERROR_RT_DRV_INTERNAL_ERROR = 507899, "driver internal error (also: a driver error without its own mapping, e.g. a trustlist rejection)";
        ACL_ERROR_RT_AICPU_INTERNAL_ERROR = 507900, "AI CPU internal error";
        ACL_ERROR_RT_SOCKET_CLOSE = 507901, "HDC disconnected";
        ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR = 507902, "AI CPU info load response error";
        ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED = 507903, "capture invalidated";
        ACL_ERROR_RT_COMM_OP_RETRY_FAIL = 507904, "HCCL operation retry failed";
        ACL_ERROR_SNAPSHOT_LOCK_TIMEOUT = 507905, "snapshot lock timed out";
        ACL_ERROR_SNAPSHOT_LOCK_FAILED = 507906, "snapshot lock failed";
        ACL_ERROR_SNAPSHOT_UNLOCK_FAILED = 507907, "snapshot unlock failed";
        ACL_ERROR_SNAPSHOT_BACKUP_FAILED = 507908, "snapshot backup failed";
        ACL_ERROR_SNAPSHOT_RESTORE_FAILED = 507909, "snapshot restore failed";
        ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 507910, "host memory range already registered";
        ACL_ERROR_HOST_MEMORY_NOT_REGISTERED = 507911, "host memory not registered";
        ACL_ERROR_SNAPSHOT_CALLBACK_FAILED = 507912, "snapshot callback failed";
        ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED = 507913, "registering a snapshot callback failed";
        ACL_ERROR_RT_L3_PORT_ERROR = 507914, "L3 port error";
        ACL_ERROR_RT_CCU_TIMEOUT = 507915, "CCU timeout";
        ACL_ERROR_RT_CCU_EXCEPTION = 507916, "CCU exception";
    }
    aliases {
        StaticConst ACL_ERROR_NONE = ACL_SUCCESS;
        Macro ACL_RT_SUCCESS = ACL_SUCCESS;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_names_match() {
        let mut seen = std::collections::HashMap::new();
        for &(code, name) in ALL_CODES {
            if let Some(prev) = seen.insert(code, name) {
                panic!("{code} is both {prev} and {name}");
            }
            assert_eq!(error_name(code), Some(name), "{code}");
            assert!(error_description(code).is_some_and(|d| !d.is_empty()));
            assert!(name.starts_with("ACL_"), "{name}");
        }
        let mut names: Vec<_> = ALL_CODES.iter().map(|c| c.1).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL_CODES.len(), "a name is used twice");
    }

    #[test]
    fn codes_ascend_within_each_layer() {
        let is_acl_layer = |code: aclError| {
            CODE_DECLS
                .iter()
                .any(|d| d.value == i128::from(code) && d.kind == ConstKind::StaticConst)
        };
        type Layer = Vec<(aclError, &'static str)>;
        let (acl, rt): (Layer, Layer) = ALL_CODES.iter().partition(|(c, _)| is_acl_layer(*c));
        // 0, 100000..=100045, 148046..=148053, 200000..=200007, 300000, 500000..=500005
        assert_eq!(acl.len(), 1 + 46 + 8 + 8 + 1 + 6);
        for layer in [acl, rt] {
            assert!(layer.windows(2).all(|w| w[0].0 < w[1].0), "{layer:?}");
        }
    }

    #[test]
    fn the_codes_devipc_relies_on() {
        let expect = [
            (ACL_SUCCESS, 0, "ACL_SUCCESS"),
            (ACL_ERROR_INVALID_PARAM, 100000, "ACL_ERROR_INVALID_PARAM"),
            (ACL_ERROR_UNINITIALIZE, 100001, "ACL_ERROR_UNINITIALIZE"),
            (
                ACL_ERROR_REPEAT_INITIALIZE,
                100002,
                "ACL_ERROR_REPEAT_INITIALIZE",
            ),
            (
                ACL_ERROR_REPEAT_FINALIZE,
                100037,
                "ACL_ERROR_REPEAT_FINALIZE",
            ),
            (
                ACL_ERROR_RT_PARAM_INVALID,
                107000,
                "ACL_ERROR_RT_PARAM_INVALID",
            ),
            (
                ACL_ERROR_RT_INVALID_DEVICEID,
                107001,
                "ACL_ERROR_RT_INVALID_DEVICEID",
            ),
            (
                ACL_ERROR_RT_CONTEXT_NULL,
                107002,
                "ACL_ERROR_RT_CONTEXT_NULL",
            ),
            (
                ACL_ERROR_RT_INVALID_HANDLE,
                107017,
                "ACL_ERROR_RT_INVALID_HANDLE",
            ),
            (
                ACL_ERROR_RT_WAIT_TIMEOUT,
                107019,
                "ACL_ERROR_RT_WAIT_TIMEOUT",
            ),
            (
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                207000,
                "ACL_ERROR_RT_FEATURE_NOT_SUPPORT",
            ),
            (
                ACL_ERROR_RT_MEMORY_ALLOCATION,
                207001,
                "ACL_ERROR_RT_MEMORY_ALLOCATION",
            ),
            (ACL_ERROR_RT_NO_DEVICE, 207004, "ACL_ERROR_RT_NO_DEVICE"),
            (
                ACL_ERROR_RT_NO_PERMISSION,
                207006,
                "ACL_ERROR_RT_NO_PERMISSION",
            ),
            (ACL_ERROR_RT_DEVICE_OOM, 207018, "ACL_ERROR_RT_DEVICE_OOM"),
            (
                ACL_ERROR_RT_DRV_INTERNAL_ERROR,
                507899,
                "ACL_ERROR_RT_DRV_INTERNAL_ERROR",
            ),
        ];
        for (constant, value, name) in expect {
            assert_eq!(constant, value, "{name}");
            assert_eq!(error_name(value), Some(name));
        }
        assert_eq!(ACL_ERROR_NONE, 0);
        assert_eq!(ACL_RT_SUCCESS, 0);
        assert_eq!(error_name(-1), None);
        assert_eq!(error_name(107999), None);
        // The name that does not exist (api-facts A.11) must stay absent.
        assert!(
            !ALL_CODES
                .iter()
                .any(|c| c.1 == "ACL_ERROR_RT_DEVICE_ID_INVALID")
        );
    }
}
