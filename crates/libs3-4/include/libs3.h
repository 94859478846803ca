/* libs3.h for the Isthmus libs3 4.x drop-in (libs3.so.4).
 *
 * Declares the C interface of libs3 4.1 (the same functions, types, struct layouts and status
 * numbers), so tools written for libs3 4.1 (IOR, mdtest, md-workbench with their S3-libs3
 * backend) build against this header and run on either library. Written for Isthmus from the
 * documented libs3 API; the behaviour notes below describe the drop-in.
 *
 * Hosts: "isthmus" (optionally "isthmus:PORT") is the Isthmus engine in the calling process,
 * on the data root named by the environment variable ISTHMUS_ROOT; "unix:/path/to.sock" is a
 * gateway's local socket (the gateway knows the caller by its uid, so keys are not used). Any
 * other host completes with S3StatusNameLookupError: this library speaks no HTTP, keep the
 * real libs3 for HTTP endpoints. A null host is the default host given to S3_initialize.
 *
 * Every call completes before it returns, request context or not: callbacks run on the calling
 * thread, in libs3's order (properties, then data or listing callbacks, then complete). Strings
 * handed to callbacks (error details, a listing's next marker) stay valid until the next call
 * after the current one returns on the same thread. The security token, the auth region and
 * timeoutMs are accepted and not used. ACLs, lifecycle, logging and signed query strings
 * complete with S3StatusNotSupported.
 *
 * Apache-2.0, as the rest of Isthmus. */
#ifndef LIBS3_H
#define LIBS3_H

#include <stdint.h>
#include <sys/select.h>

#ifdef __cplusplus
extern "C" {
#endif

/* This header is the Isthmus one (the value is the libs3 ABI major version it declares). */
#define ISTHMUS_LIBS3 4

/* ---- Limits and defaults ---- */
#define S3_MAX_HOSTNAME_SIZE 255
#define S3_DEFAULT_HOSTNAME "s3.amazonaws.com"
#define S3_MAX_BUCKET_NAME_SIZE 255
#define S3_MAX_KEY_SIZE 1024
#define S3_MAX_METADATA_SIZE 2048
#define S3_METADATA_HEADER_NAME_PREFIX "x-amz-meta-"
/* Metadata pairs that fit in S3_MAX_METADATA_SIZE with the shortest name and value. */
#define S3_MAX_METADATA_COUNT (S3_MAX_METADATA_SIZE / (sizeof(S3_METADATA_HEADER_NAME_PREFIX "nv") - 1))
#define S3_MAX_ACL_GRANT_COUNT 100
#define S3_MAX_GRANTEE_EMAIL_ADDRESS_SIZE 128
#define S3_MAX_GRANTEE_USER_ID_SIZE 128
#define S3_MAX_GRANTEE_DISPLAY_NAME_SIZE 128
/* Room for a signed URL: scheme, host, a fully escaped key and the signature parameters. */
#define S3_MAX_AUTHENTICATED_QUERY_STRING_SIZE \
    (sizeof("https:///") + S3_MAX_HOSTNAME_SIZE + (S3_MAX_KEY_SIZE * 3) + sizeof("?AWSAccessKeyId=") + 32 + \
     sizeof("&Expires=") + 32 + sizeof("&Signature=") + 28 + 1)

/* Flags of S3_initialize (accepted, nothing to set up here). */
#define S3_INIT_WINSOCK 1
#define S3_INIT_VERIFY_PEER 2
#define S3_INIT_ALL (S3_INIT_WINSOCK)

#define S3_DEFAULT_REGION "us-east-1"

/* ---- Statuses ----
 * The outcome of a call (through the complete callback) and what callbacks return to go on
 * (S3StatusOK) or stop. S3_get_status_name gives the name without the "S3Status" prefix. */
typedef enum {
    /* Success, and failures inside the library or of the request as given. */
    S3StatusOK = 0,
    S3StatusInternalError = 1,
    S3StatusOutOfMemory = 2,
    S3StatusInterrupted = 3,
    S3StatusInvalidBucketNameTooLong = 4,
    S3StatusInvalidBucketNameFirstCharacter = 5,
    S3StatusInvalidBucketNameCharacter = 6,
    S3StatusInvalidBucketNameCharacterSequence = 7,
    S3StatusInvalidBucketNameTooShort = 8,
    S3StatusInvalidBucketNameDotQuadNotation = 9,
    S3StatusQueryParamsTooLong = 10,
    S3StatusFailedToInitializeRequest = 11,
    S3StatusMetaDataHeadersTooLong = 12,
    S3StatusBadMetaData = 13,
    S3StatusBadContentType = 14,
    S3StatusContentTypeTooLong = 15,
    S3StatusBadMD5 = 16,
    S3StatusMD5TooLong = 17,
    S3StatusBadCacheControl = 18,
    S3StatusCacheControlTooLong = 19,
    S3StatusBadContentDispositionFilename = 20,
    S3StatusContentDispositionFilenameTooLong = 21,
    S3StatusBadContentEncoding = 22,
    S3StatusContentEncodingTooLong = 23,
    S3StatusBadIfMatchETag = 24,
    S3StatusIfMatchETagTooLong = 25,
    S3StatusBadIfNotMatchETag = 26,
    S3StatusIfNotMatchETagTooLong = 27,
    S3StatusHeadersTooLong = 28,
    S3StatusKeyTooLong = 29,
    S3StatusUriTooLong = 30,
    S3StatusXmlParseFailure = 31,
    S3StatusEmailAddressTooLong = 32,
    S3StatusUserIdTooLong = 33,
    S3StatusUserDisplayNameTooLong = 34,
    S3StatusGroupUriTooLong = 35,
    S3StatusPermissionTooLong = 36,
    S3StatusTargetBucketTooLong = 37,
    S3StatusTargetPrefixTooLong = 38,
    S3StatusTooManyGrants = 39,
    S3StatusBadGrantee = 40,
    S3StatusBadPermission = 41,
    S3StatusXmlDocumentTooLarge = 42,
    S3StatusNameLookupError = 43,
    S3StatusFailedToConnect = 44,
    S3StatusServerFailedVerification = 45,
    S3StatusConnectionFailed = 46,
    S3StatusAbortedByCallback = 47,
    S3StatusNotSupported = 48,
    /* Errors the service reported, by their S3 error code. */
    S3StatusErrorAccessDenied = 49,
    S3StatusErrorAccountProblem = 50,
    S3StatusErrorAmbiguousGrantByEmailAddress = 51,
    S3StatusErrorBadDigest = 52,
    S3StatusErrorBucketAlreadyExists = 53,
    S3StatusErrorBucketAlreadyOwnedByYou = 54,
    S3StatusErrorBucketNotEmpty = 55,
    S3StatusErrorCredentialsNotSupported = 56,
    S3StatusErrorCrossLocationLoggingProhibited = 57,
    S3StatusErrorEntityTooSmall = 58,
    S3StatusErrorEntityTooLarge = 59,
    S3StatusErrorExpiredToken = 60,
    S3StatusErrorIllegalVersioningConfigurationException = 61,
    S3StatusErrorIncompleteBody = 62,
    S3StatusErrorIncorrectNumberOfFilesInPostRequest = 63,
    S3StatusErrorInlineDataTooLarge = 64,
    S3StatusErrorInternalError = 65,
    S3StatusErrorInvalidAccessKeyId = 66,
    S3StatusErrorInvalidAddressingHeader = 67,
    S3StatusErrorInvalidArgument = 68,
    S3StatusErrorInvalidBucketName = 69,
    S3StatusErrorInvalidBucketState = 70,
    S3StatusErrorInvalidDigest = 71,
    S3StatusErrorInvalidEncryptionAlgorithmError = 72,
    S3StatusErrorInvalidLocationConstraint = 73,
    S3StatusErrorInvalidObjectState = 74,
    S3StatusErrorInvalidPart = 75,
    S3StatusErrorInvalidPartOrder = 76,
    S3StatusErrorInvalidPayer = 77,
    S3StatusErrorInvalidPolicyDocument = 78,
    S3StatusErrorInvalidRange = 79,
    S3StatusErrorInvalidRequest = 80,
    S3StatusErrorInvalidSecurity = 81,
    S3StatusErrorInvalidSOAPRequest = 82,
    S3StatusErrorInvalidStorageClass = 83,
    S3StatusErrorInvalidTargetBucketForLogging = 84,
    S3StatusErrorInvalidToken = 85,
    S3StatusErrorInvalidURI = 86,
    S3StatusErrorKeyTooLong = 87,
    S3StatusErrorMalformedACLError = 88,
    S3StatusErrorMalformedPOSTRequest = 89,
    S3StatusErrorMalformedXML = 90,
    S3StatusErrorMaxMessageLengthExceeded = 91,
    S3StatusErrorMaxPostPreDataLengthExceededError = 92,
    S3StatusErrorMetadataTooLarge = 93,
    S3StatusErrorMethodNotAllowed = 94,
    S3StatusErrorMissingAttachment = 95,
    S3StatusErrorMissingContentLength = 96,
    S3StatusErrorMissingRequestBodyError = 97,
    S3StatusErrorMissingSecurityElement = 98,
    S3StatusErrorMissingSecurityHeader = 99,
    S3StatusErrorNoLoggingStatusForKey = 100,
    S3StatusErrorNoSuchBucket = 101,
    S3StatusErrorNoSuchKey = 102,
    S3StatusErrorNoSuchLifecycleConfiguration = 103,
    S3StatusErrorNoSuchUpload = 104,
    S3StatusErrorNoSuchVersion = 105,
    S3StatusErrorNotImplemented = 106,
    S3StatusErrorNotSignedUp = 107,
    S3StatusErrorNoSuchBucketPolicy = 108,
    S3StatusErrorOperationAborted = 109,
    S3StatusErrorPermanentRedirect = 110,
    S3StatusErrorPreconditionFailed = 111,
    S3StatusErrorRedirect = 112,
    S3StatusErrorRestoreAlreadyInProgress = 113,
    S3StatusErrorRequestIsNotMultiPartContent = 114,
    S3StatusErrorRequestTimeout = 115,
    S3StatusErrorRequestTimeTooSkewed = 116,
    S3StatusErrorRequestTorrentOfBucketError = 117,
    S3StatusErrorSignatureDoesNotMatch = 118,
    S3StatusErrorServiceUnavailable = 119,
    S3StatusErrorSlowDown = 120,
    S3StatusErrorTemporaryRedirect = 121,
    S3StatusErrorTokenRefreshRequired = 122,
    S3StatusErrorTooManyBuckets = 123,
    S3StatusErrorUnexpectedContent = 124,
    S3StatusErrorUnresolvableGrantByEmailAddress = 125,
    S3StatusErrorUserKeyMustBeSpecified = 126,
    S3StatusErrorQuotaExceeded = 127,
    S3StatusErrorUnknown = 128,
    /* Errors known only by their HTTP status (a HEAD answer carries no error document). */
    S3StatusHttpErrorMovedTemporarily = 129,
    S3StatusHttpErrorBadRequest = 130,
    S3StatusHttpErrorForbidden = 131,
    S3StatusHttpErrorNotFound = 132,
    S3StatusHttpErrorConflict = 133,
    S3StatusHttpErrorUnknown = 134
} S3Status;

typedef enum { S3ProtocolHTTPS = 0, S3ProtocolHTTP = 1 } S3Protocol;

typedef enum { S3UriStyleVirtualHost = 0, S3UriStylePath = 1 } S3UriStyle;

typedef enum {
    S3GranteeTypeAmazonCustomerByEmail = 0,
    S3GranteeTypeCanonicalUser = 1,
    S3GranteeTypeAllAwsUsers = 2,
    S3GranteeTypeAllUsers = 3,
    S3GranteeTypeLogDelivery = 4
} S3GranteeType;

typedef enum {
    S3PermissionRead = 0,
    S3PermissionWrite = 1,
    S3PermissionReadACP = 2,
    S3PermissionWriteACP = 3,
    S3PermissionFullControl = 4
} S3Permission;

typedef enum {
    S3CannedAclPrivate = 0,
    S3CannedAclPublicRead = 1,
    S3CannedAclPublicReadWrite = 2,
    S3CannedAclAuthenticatedRead = 3,
    S3CannedAclBucketOwnerFullControl = 4
} S3CannedAcl;

/* ---- Types ---- */

/* A handle requests may be given; here calls complete at once whether or not one is given. */
typedef struct S3RequestContext S3RequestContext;

/* One metadata pair (name without the x-amz-meta- prefix). */
typedef struct S3NameValue {
    const char *name;
    const char *value;
} S3NameValue;

/* What a response says about an object; valid during the properties callback only. */
typedef struct S3ResponseProperties {
    const char *requestId;      /* null here */
    const char *requestId2;     /* null here */
    const char *contentType;    /* null when the object has none */
    uint64_t contentLength;     /* the body's length (GET, HEAD); 0 after a PUT */
    const char *server;         /* "Isthmus" */
    const char *eTag;           /* quoted */
    int64_t lastModified;       /* seconds since the Unix epoch */
    int metaDataCount;
    const S3NameValue *metaData;
    char usesServerSideEncryption; /* 0 here */
} S3ResponseProperties;

/* One ACL grant (the ACL calls are not served; the type keeps the layout). */
typedef struct S3AclGrant {
    S3GranteeType granteeType;
    union {
        struct {
            char emailAddress[S3_MAX_GRANTEE_EMAIL_ADDRESS_SIZE];
        } amazonCustomerByEmail;
        struct {
            char id[S3_MAX_GRANTEE_USER_ID_SIZE];
            char displayName[S3_MAX_GRANTEE_DISPLAY_NAME_SIZE];
        } canonicalUser;
    } grantee;
    S3Permission permission;
} S3AclGrant;

/* Where a bucket is and how to reach it. */
typedef struct S3BucketContext {
    const char *hostName;       /* "isthmus", "unix:PATH", or null for the default host */
    const char *bucketName;
    S3Protocol protocol;        /* not used */
    S3UriStyle uriStyle;        /* not used */
    const char *accessKeyId;    /* not used */
    const char *secretAccessKey;/* not used */
    const char *securityToken;  /* not used */
    const char *authRegion;     /* not used */
} S3BucketContext;

/* One object of a listing; valid during the listing callback only. */
typedef struct S3ListBucketContent {
    const char *key;
    int64_t lastModified;
    const char *eTag;
    uint64_t size;
    const char *ownerId;
    const char *ownerDisplayName;
} S3ListBucketContent;

/* One multipart upload in progress. */
typedef struct S3ListMultipartUpload {
    const char *key;
    const char *uploadId;
    const char *initiatorId;
    const char *initiatorDisplayName;
    const char *ownerId;
    const char *ownerDisplayName;
    const char *storageClass;
    int64_t initiated;
} S3ListMultipartUpload;

/* One stored part of an upload. */
typedef struct S3ListPart {
    const char *eTag;
    int64_t lastModified;
    uint64_t partNumber;
    uint64_t size;
} S3ListPart;

/* What a put stores with the object (content type, caching, encoding, disposition, user
 * metadata; expires and the canned ACL are not used). */
typedef struct S3PutProperties {
    const char *contentType;
    const char *md5;            /* base64 Content-MD5 the body is checked against, or null */
    const char *cacheControl;
    const char *contentDispositionFilename;
    const char *contentEncoding;
    int64_t expires;
    S3CannedAcl cannedAcl;
    int metaDataCount;
    const S3NameValue *metaData;
    char useServerSideEncryption;
} S3PutProperties;

/* Conditions of a get (times in seconds since the epoch, -1 for none; ETags or null). */
typedef struct S3GetConditions {
    int64_t ifModifiedSince;
    int64_t ifNotModifiedSince;
    const char *ifMatchETag;
    const char *ifNotMatchETag;
} S3GetConditions;

/* Why a call failed; `message` says it in words. */
typedef struct S3ErrorDetails {
    const char *message;
    const char *resource;
    const char *furtherDetails;
    int extraDetailsCount;
    S3NameValue *extraDetails;
} S3ErrorDetails;

/* ---- Callbacks ----
 * A callback returning anything but S3StatusOK stops the request, which then completes with
 * that status. */

typedef S3Status(S3ResponsePropertiesCallback)(const S3ResponseProperties *properties, void *callbackData);

/* Called once at the end of every request (but see S3_abort_multipart_upload). */
typedef void(S3ResponseCompleteCallback)(S3Status status, const S3ErrorDetails *errorDetails, void *callbackData);

typedef S3Status(S3ListServiceCallback)(const char *ownerId, const char *ownerDisplayName, const char *bucketName,
                                        int64_t creationDateSeconds, void *callbackData);

/* nextMarker is never null ("" when the page is the last one). */
typedef S3Status(S3ListBucketCallback)(int isTruncated, const char *nextMarker, int contentsCount,
                                       const S3ListBucketContent *contents, int commonPrefixesCount,
                                       const char **commonPrefixes, void *callbackData);

/* Fill at most bufferSize bytes of buffer; return how many, 0 at the end, negative to abort. */
typedef int(S3PutObjectDataCallback)(int bufferSize, char *buffer, void *callbackData);

/* The next bufferSize bytes of the body. */
typedef S3Status(S3GetObjectDataCallback)(int bufferSize, const char *buffer, void *callbackData);

typedef S3Status(S3MultipartInitialResponseCallback)(const char *upload_id, void *callbackData);

typedef S3Status(S3ListMultipartUploadsResponseCallback)(int isTruncated, const char *nextKeyMarker,
                                                         const char *nextUploadIdMarker, int uploadsCount,
                                                         const S3ListMultipartUpload *uploads,
                                                         int commonPrefixesCount, const char **commonPrefixes,
                                                         void *callbackData);

/* lastPartNumber: how many parts earlier callbacks of the same call delivered. */
typedef S3Status(S3ListPartsResponseCallback)(int isTruncated, const char *nextPartNumberMarker,
                                              const char *initiatorId, const char *initiatorDisplayName,
                                              const char *ownerId, const char *ownerDisplayName,
                                              const char *storageClass, int partsCount, int lastPartNumber,
                                              const S3ListPart *parts, void *callbackData);

typedef S3Status(S3MultipartCommitResponseCallback)(const char *location, const char *etag, void *callbackData);

/* Given to S3_create_request_context_ex; never called here (there is no curl). */
typedef S3Status (*S3SetupCurlCallback)(void *curlMulti, void *curlEasy, void *setupData);

/* ---- Handlers: the callbacks of one call; each starts with an S3ResponseHandler ---- */

typedef struct S3ResponseHandler {
    S3ResponsePropertiesCallback *propertiesCallback;
    S3ResponseCompleteCallback *completeCallback;
} S3ResponseHandler;

typedef struct S3ListServiceHandler {
    S3ResponseHandler responseHandler;
    S3ListServiceCallback *listServiceCallback;
} S3ListServiceHandler;

typedef struct S3ListBucketHandler {
    S3ResponseHandler responseHandler;
    S3ListBucketCallback *listBucketCallback;
} S3ListBucketHandler;

typedef struct S3PutObjectHandler {
    S3ResponseHandler responseHandler;
    S3PutObjectDataCallback *putObjectDataCallback;
} S3PutObjectHandler;

typedef struct S3GetObjectHandler {
    S3ResponseHandler responseHandler;
    S3GetObjectDataCallback *getObjectDataCallback;
} S3GetObjectHandler;

typedef struct S3MultipartInitialHandler {
    S3ResponseHandler responseHandler;
    S3MultipartInitialResponseCallback *responseXmlCallback; /* gets the upload id, after complete */
} S3MultipartInitialHandler;

typedef struct S3MultipartCommitHandler {
    S3ResponseHandler responseHandler;
    S3PutObjectDataCallback *putObjectDataCallback;          /* hands over the CompleteMultipartUpload XML */
    S3MultipartCommitResponseCallback *responseXmlCallback;  /* location and ETag, after complete */
} S3MultipartCommitHandler;

typedef struct S3ListMultipartUploadsHandler {
    S3ResponseHandler responseHandler;
    S3ListMultipartUploadsResponseCallback *responseXmlCallback;
} S3ListMultipartUploadsHandler;

typedef struct S3ListPartsHandler {
    S3ResponseHandler responseHandler;
    S3ListPartsResponseCallback *responseXmlCallback;
} S3ListPartsHandler;

typedef struct S3AbortMultipartUploadHandler {
    S3ResponseHandler responseHandler;
} S3AbortMultipartUploadHandler;

/* ---- General ---- */

/* Sets the default host (used when a call's host name is null); returns S3StatusOK. */
S3Status S3_initialize(const char *userAgentInfo, int flags, const char *defaultS3HostName);
void S3_deinitialize(void);
const char *S3_get_status_name(S3Status status);
S3Status S3_validate_bucket_name(const char *bucketName, S3UriStyle uriStyle);
/* Not served: *aclGrantCountReturn = 0, S3StatusNotSupported. */
S3Status S3_convert_acl(char *aclXml, char *ownerId, char *ownerDisplayName, int *aclGrantCountReturn,
                        S3AclGrant *aclGrants);
/* 1 for NameLookupError, FailedToConnect, ConnectionFailed, ErrorInternalError,
 * ErrorOperationAborted and ErrorRequestTimeout. */
int S3_status_is_retryable(S3Status status);

/* ---- Request contexts: tokens; running one finds nothing left to do ---- */
S3Status S3_create_request_context(S3RequestContext **requestContextReturn);
S3Status S3_create_request_context_ex(S3RequestContext **requestContextReturn, void *curlMulti,
                                      S3SetupCurlCallback setupCurlCallback, void *setupCurlCallbackData);
void S3_destroy_request_context(S3RequestContext *requestContext);
S3Status S3_runall_request_context(S3RequestContext *requestContext);
S3Status S3_runonce_request_context(S3RequestContext *requestContext, int *requestsRemainingReturn);
S3Status S3_process_request_context(S3RequestContext *requestContext);
/* Clears the sets; *maxFd = -1. */
S3Status S3_get_request_context_fdsets(S3RequestContext *requestContext, fd_set *readFdSet, fd_set *writeFdSet,
                                       fd_set *exceptFdSet, int *maxFd);
int64_t S3_get_request_context_timeout(S3RequestContext *requestContext);
void S3_set_request_context_verify_peer(S3RequestContext *requestContext, int verifyPeer);

/* No HTTP endpoint to sign for: buffer = "", S3StatusNotSupported. */
S3Status S3_generate_authenticated_query_string(char *buffer, const S3BucketContext *bucketContext, const char *key,
                                                int expires, const char *resource, const char *httpMethod);

/* ---- Service and buckets ---- */
void S3_list_service(S3Protocol protocol, const char *accessKeyId, const char *secretAccessKey,
                     const char *securityToken, const char *hostName, const char *authRegion,
                     S3RequestContext *requestContext, int timeoutMs, const S3ListServiceHandler *handler,
                     void *callbackData);
/* The location returned is always "". */
void S3_test_bucket(S3Protocol protocol, S3UriStyle uriStyle, const char *accessKeyId, const char *secretAccessKey,
                    const char *securityToken, const char *hostName, const char *bucketName, const char *authRegion,
                    int locationConstraintReturnSize, char *locationConstraintReturn,
                    S3RequestContext *requestContext, int timeoutMs, const S3ResponseHandler *handler,
                    void *callbackData);
void S3_create_bucket(S3Protocol protocol, const char *accessKeyId, const char *secretAccessKey,
                      const char *securityToken, const char *hostName, const char *bucketName,
                      const char *authRegion, S3CannedAcl cannedAcl, const char *locationConstraint,
                      S3RequestContext *requestContext, int timeoutMs, const S3ResponseHandler *handler,
                      void *callbackData);
void S3_delete_bucket(S3Protocol protocol, S3UriStyle uriStyle, const char *accessKeyId, const char *secretAccessKey,
                      const char *securityToken, const char *hostName, const char *bucketName,
                      const char *authRegion, S3RequestContext *requestContext, int timeoutMs,
                      const S3ResponseHandler *handler, void *callbackData);
/* One listing callback per page of at most min(maxkeys, 1000) keys; a marker of null or ""
 * starts at the beginning. */
void S3_list_bucket(const S3BucketContext *bucketContext, const char *prefix, const char *marker,
                    const char *delimiter, int maxkeys, S3RequestContext *requestContext, int timeoutMs,
                    const S3ListBucketHandler *handler, void *callbackData);

/* ---- Objects ---- */
/* The body is pulled from putObjectDataCallback until contentLength bytes have come. */
void S3_put_object(const S3BucketContext *bucketContext, const char *key, uint64_t contentLength,
                   const S3PutProperties *putProperties, S3RequestContext *requestContext, int timeoutMs,
                   const S3PutObjectHandler *handler, void *callbackData);
/* Put properties, when given, replace the copy's metadata. */
void S3_copy_object(const S3BucketContext *bucketContext, const char *key, const char *destinationBucket,
                    const char *destinationKey, const S3PutProperties *putProperties, int64_t *lastModifiedReturn,
                    int eTagReturnSize, char *eTagReturn, S3RequestContext *requestContext, int timeoutMs,
                    const S3ResponseHandler *handler, void *callbackData);
/* partNo > 0: count bytes of the source from startOffset (count 0: all) become part partNo of
 * upload uploadId of the destination; otherwise as S3_copy_object. */
void S3_copy_object_range(const S3BucketContext *bucketContext, const char *key, const char *destinationBucket,
                          const char *destinationKey, const int partNo, const char *uploadId,
                          const unsigned long startOffset, const unsigned long count,
                          const S3PutProperties *putProperties, int64_t *lastModifiedReturn, int eTagReturnSize,
                          char *eTagReturn, S3RequestContext *requestContext, int timeoutMs,
                          const S3ResponseHandler *handler, void *callbackData);
/* byteCount 0 reads from startByte to the end. */
void S3_get_object(const S3BucketContext *bucketContext, const char *key, const S3GetConditions *getConditions,
                   uint64_t startByte, uint64_t byteCount, S3RequestContext *requestContext, int timeoutMs,
                   const S3GetObjectHandler *handler, void *callbackData);
/* A missing object completes with S3StatusHttpErrorNotFound. */
void S3_head_object(const S3BucketContext *bucketContext, const char *key, S3RequestContext *requestContext,
                    int timeoutMs, const S3ResponseHandler *handler, void *callbackData);
void S3_delete_object(const S3BucketContext *bucketContext, const char *key, S3RequestContext *requestContext,
                      int timeoutMs, const S3ResponseHandler *handler, void *callbackData);

/* ---- Not served: complete with S3StatusNotSupported ---- */
void S3_get_acl(const S3BucketContext *bucketContext, const char *key, char *ownerId, char *ownerDisplayName,
                int *aclGrantCountReturn, S3AclGrant *aclGrants, S3RequestContext *requestContext, int timeoutMs,
                const S3ResponseHandler *handler, void *callbackData);
void S3_set_acl(const S3BucketContext *bucketContext, const char *key, const char *ownerId,
                const char *ownerDisplayName, int aclGrantCount, const S3AclGrant *aclGrants,
                S3RequestContext *requestContext, int timeoutMs, const S3ResponseHandler *handler,
                void *callbackData);
void S3_get_lifecycle(const S3BucketContext *bucketContext, char *lifecycleXmlDocumentReturn,
                      int lifecycleXmlDocumentBufferSize, S3RequestContext *requestContext, int timeoutMs,
                      const S3ResponseHandler *handler, void *callbackData);
void S3_set_lifecycle(const S3BucketContext *bucketContext, const char *lifecycleXmlDocument,
                      S3RequestContext *requestContext, int timeoutMs, const S3ResponseHandler *handler,
                      void *callbackData);
void S3_get_server_access_logging(const S3BucketContext *bucketContext, char *targetBucketReturn,
                                  char *targetPrefixReturn, int *aclGrantCountReturn, S3AclGrant *aclGrants,
                                  S3RequestContext *requestContext, int timeoutMs, const S3ResponseHandler *handler,
                                  void *callbackData);
void S3_set_server_access_logging(const S3BucketContext *bucketContext, const char *targetBucket,
                                  const char *targetPrefix, int aclGrantCount, const S3AclGrant *aclGrants,
                                  S3RequestContext *requestContext, int timeoutMs, const S3ResponseHandler *handler,
                                  void *callbackData);

/* ---- Multipart uploads ---- */
/* Callbacks: properties, complete, then responseXmlCallback with the upload id (valid during
 * that callback only). */
void S3_initiate_multipart(S3BucketContext *bucketContext, const char *key, S3PutProperties *putProperties,
                           S3MultipartInitialHandler *handler, S3RequestContext *requestContext, int timeoutMs,
                           void *callbackData);
/* partContentLength bytes pulled from putObjectDataCallback; the part's ETag arrives in the
 * properties callback. */
void S3_upload_part(S3BucketContext *bucketContext, const char *key, S3PutProperties *putProperties,
                    S3PutObjectHandler *handler, int seq, const char *upload_id, int partContentLength,
                    S3RequestContext *requestContext, int timeoutMs, void *callbackData);
/* contentLength bytes of CompleteMultipartUpload XML pulled from the handler's
 * putObjectDataCallback; callbacks: properties, complete, then responseXmlCallback. */
void S3_complete_multipart_upload(S3BucketContext *bucketContext, const char *key, S3MultipartCommitHandler *handler,
                                  const char *upload_id, int contentLength, S3RequestContext *requestContext,
                                  int timeoutMs, void *callbackData);
void S3_list_parts(S3BucketContext *bucketContext, const char *key, const char *partnumbermarker,
                   const char *uploadid, const char *encodingtype, int maxparts, S3RequestContext *requestContext,
                   int timeoutMs, const S3ListPartsHandler *handler, void *callbackData);
/* No callback data: the properties callback gets null, the complete callback is not called,
 * and a failure is printed to stderr. */
void S3_abort_multipart_upload(S3BucketContext *bucketContext, const char *key, const char *uploadId, int timeoutMs,
                               S3AbortMultipartUploadHandler *handler);
/* The delimiter and encoding type are not used. */
void S3_list_multipart_uploads(S3BucketContext *bucketContext, const char *prefix, const char *keymarker,
                               const char *uploadidmarker, const char *encodingtype, const char *delimiter,
                               int maxuploads, S3RequestContext *requestContext, int timeoutMs,
                               const S3ListMultipartUploadsHandler *handler, void *callbackData);

#ifdef __cplusplus
}
#endif

#endif /* LIBS3_H */
