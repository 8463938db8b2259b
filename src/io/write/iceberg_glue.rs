//! An Iceberg catalog over the AWS Glue Data Catalog, the layout every engine on AWS
//! reads (Athena, EMR, Spark's and pyiceberg's `GlueCatalog`): a namespace is a Glue
//! database, a table is a Glue table of `table_type` `ICEBERG` whose
//! `metadata_location` parameter names its current metadata file.
//!
//! A commit writes the next metadata file, then `UpdateTable` with the `VersionId` the
//! base was read at: Glue refuses it (`ConcurrentModificationException`) when anything
//! committed in between, which is the compare-and-swap the finalize loop relies on.
//! Requests are JSON over SigV4, signed by the store's own client (no AWS SDK, no
//! opendal: docs/DECISIONS.md).
use crate::store::aws::{AwsClient, AwsError, Service};
use async_trait::async_trait;
use iceberg::io::FileIO;
use iceberg::spec::{NestedFieldRef, PrimitiveType, TableMetadata, TableMetadataBuilder, Type};
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, MetadataLocation, Namespace, NamespaceIdent, Result, Runtime,
    TableCommit, TableCreation, TableIdent,
};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::str::FromStr;

pub const GLUE: Service = Service {
    signing_name: "glue",
    endpoint_var: "AWS_ENDPOINT_URL_GLUE",
    host_prefix: "glue",
};

const TABLE_TYPE: &str = "table_type";
const ICEBERG: &str = "ICEBERG";
const METADATA_LOCATION: &str = "metadata_location";
const PREVIOUS_METADATA_LOCATION: &str = "previous_metadata_location";

/// The Glue Data Catalog of one region (and account, or `catalog_id`).
#[derive(Debug)]
pub struct GlueCatalog {
    api: AwsClient,
    catalog_id: Option<String>,
    file_io: FileIO,
    runtime: Runtime,
}

/// A Glue table of type Iceberg: where its metadata is, the version Glue answered it
/// at, and the whole table (its other parameters and fields are kept on update).
struct GlueTable {
    metadata_location: String,
    version: Option<String>,
    table: Value,
}

/// A Glue answer that is an error, by its AWS error code.
fn code_of(e: &AwsError) -> Option<&str> {
    match e {
        AwsError::Api { code, .. } => code.as_deref(),
        AwsError::Environment(_) => None,
    }
}

/// Worth asking again: throttling, a 5xx, or no answer at all.
fn transient(e: &AwsError) -> bool {
    match e {
        AwsError::Api { status, code, .. } => {
            matches!(
                code.as_deref(),
                Some(
                    "ThrottlingException"
                        | "InternalServiceException"
                        | "OperationTimeoutException"
                )
            ) || status.is_none_or(|s| s == 429 || s >= 500)
        }
        AwsError::Environment(_) => false,
    }
}

fn unexpected(e: AwsError) -> Error {
    Error::new(ErrorKind::Unexpected, e.to_string())
}

fn database_of(ns: &NamespaceIdent) -> Result<&str> {
    match ns.as_ref().as_slice() {
        [name] if !name.is_empty() => Ok(name),
        _ => Err(Error::new(
            ErrorKind::DataInvalid,
            format!("a Glue database is one name, not {ns:?}"),
        )),
    }
}

impl GlueCatalog {
    /// `endpoint` empty: `AWS_ENDPOINT_URL_GLUE`, `AWS_ENDPOINT_URL`, else the
    /// region's public endpoint.
    pub fn new(
        region: Option<String>,
        endpoint: &str,
        catalog_id: Option<String>,
        file_io: FileIO,
    ) -> std::result::Result<Self, String> {
        let endpoint = (!endpoint.is_empty()).then(|| endpoint.to_string());
        let api = AwsClient::from_env(&GLUE, "output.iceberg.catalog (glue)", region, endpoint)
            .map_err(|e| e.to_string())?;
        Self::with_client(api, catalog_id, file_io)
    }

    /// The catalog through `api` (a client of [`GLUE`]).
    pub fn with_client(
        api: AwsClient,
        catalog_id: Option<String>,
        file_io: FileIO,
    ) -> std::result::Result<Self, String> {
        let runtime = Runtime::try_current().map_err(|e| e.to_string())?;
        Ok(GlueCatalog {
            api,
            catalog_id,
            file_io,
            runtime,
        })
    }

    /// One Glue call (`AWSGlue.{target}`) with `body` (the catalog id added), asked
    /// again with backoff while the answer is transient.
    async fn call(
        &self,
        target: &'static str,
        mut body: Value,
    ) -> std::result::Result<Value, AwsError> {
        if let Some(id) = &self.catalog_id {
            body["CatalogId"] = json!(id);
        }
        let header = format!("AWSGlue.{target}");
        let bytes = body.to_string().into_bytes();
        let mut delay = std::time::Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            match self
                .api
                .post(
                    target,
                    "/",
                    "application/x-amz-json-1.1",
                    &[("x-amz-target", &header)],
                    bytes.clone(),
                    now,
                )
                .await
            {
                // Create and Update calls may answer an empty body; a Get must not.
                Ok(text) if text.trim().is_empty() && !target.starts_with("Get") => {
                    return Ok(json!({}));
                }
                Ok(text) if text.trim().is_empty() && attempt < 8 => {
                    tracing::warn!(
                        call = target,
                        attempt,
                        "Glue answered nothing; asking again"
                    );
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_secs(10));
                    attempt += 1;
                }
                Ok(text) => {
                    return serde_json::from_str(&text)
                        .map_err(|e| self.api.bad_answer(target, &text, e));
                }
                Err(e) if transient(&e) && attempt < 8 => {
                    tracing::warn!(call = target, attempt, error = %e, "Glue call failed; asking again");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_secs(10));
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The Glue table as Glue answers it; `None` if there is none.
    async fn glue_table(&self, id: &TableIdent) -> Result<Option<GlueTable>> {
        let db = database_of(id.namespace())?;
        let answer = self
            .call("GetTable", json!({"DatabaseName": db, "Name": id.name()}))
            .await;
        let v = match answer {
            Ok(v) => v,
            Err(e) if code_of(&e) == Some("EntityNotFoundException") => return Ok(None),
            Err(e) => return Err(unexpected(e)),
        };
        let t = v["Table"].clone();
        let params = &t["Parameters"];
        let is_iceberg = params[TABLE_TYPE]
            .as_str()
            .is_some_and(|s| s.eq_ignore_ascii_case(ICEBERG));
        match (is_iceberg, params[METADATA_LOCATION].as_str()) {
            (true, Some(l)) => Ok(Some(GlueTable {
                metadata_location: l.to_string(),
                version: t["VersionId"].as_str().map(str::to_string),
                table: t,
            })),
            _ => Err(Error::new(
                ErrorKind::DataInvalid,
                format!(
                    "Glue table {db}.{} is not an Iceberg table (no table_type ICEBERG with a metadata_location)",
                    id.name()
                ),
            )),
        }
    }

    /// The commit onto the table as Glue has it, refused (a retryable conflict) when
    /// its metadata is not `base` (the metadata the caller checked, when it says).
    pub async fn update_table_on(&self, commit: TableCommit, base: Option<&str>) -> Result<Table> {
        let id = commit.identifier().clone();
        let db = database_of(id.namespace())?.to_string();
        let Some(current) = self.glue_table(&id).await? else {
            return Err(Error::new(
                ErrorKind::TableNotFound,
                format!("no Glue table {id}"),
            ));
        };
        if let Some(b) = base
            && b != current.metadata_location
        {
            return Err(Error::new(
                ErrorKind::CatalogCommitConflicts,
                format!(
                    "Glue table {id} moved on from {b} to {}",
                    current.metadata_location
                ),
            )
            .with_retryable(true));
        }
        // Without a version Glue could not refuse a concurrent commit.
        let Some(version) = current.version.clone() else {
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!(
                    "Glue answered table {id} without a VersionId; refusing an unconditional update"
                ),
            ));
        };
        let metadata = TableMetadata::read_from(&self.file_io, &current.metadata_location).await?;
        let base_table = self.table(&id, current.metadata_location.clone(), metadata)?;
        let staged = commit.apply(base_table)?;
        let at = MetadataLocation::from_str(staged.metadata_location_result()?)?;
        staged.metadata().write_to(&self.file_io, &at).await?;
        let input = table_input(
            id.name(),
            &at.to_string(),
            staged.metadata(),
            Some(&current),
        );
        // SkipArchive: Glue caps the versions it keeps per table and account; the
        // metadata files are the table's history.
        let body = json!({
            "DatabaseName": db,
            "TableInput": input,
            "SkipArchive": true,
            "VersionId": version,
        });
        match self.call("UpdateTable", body).await {
            Ok(_) => Ok(staged),
            Err(e) if code_of(&e) == Some("ConcurrentModificationException") => Err(Error::new(
                ErrorKind::CatalogCommitConflicts,
                format!("Glue table {id} changed since it was read: {e}"),
            )
            .with_retryable(true)),
            Err(e) if code_of(&e) == Some("EntityNotFoundException") => Err(Error::new(
                ErrorKind::TableNotFound,
                format!("Glue table {id} was dropped: {e}"),
            )),
            Err(e) => Err(unexpected(e)),
        }
    }

    fn table(&self, id: &TableIdent, location: String, metadata: TableMetadata) -> Result<Table> {
        Table::builder()
            .file_io(self.file_io.clone())
            .identifier(id.clone())
            .metadata_location(location)
            .metadata(metadata)
            .runtime(self.runtime.clone())
            .build()
    }

    fn unsupported<T>(&self, what: &str) -> Result<T> {
        Err(Error::new(
            ErrorKind::FeatureUnsupported,
            format!("mdf's Glue catalog creates and appends to tables; it does not {what}"),
        ))
    }
}

/// The Hive type Glue shows for an Iceberg type (what Athena's DDL and the Glue
/// console display; readers take the schema from the Iceberg metadata).
fn hive_type(t: &Type) -> String {
    match t {
        Type::Primitive(p) => match p {
            PrimitiveType::Boolean => "boolean".into(),
            PrimitiveType::Int => "int".into(),
            PrimitiveType::Long => "bigint".into(),
            PrimitiveType::Float => "float".into(),
            PrimitiveType::Double => "double".into(),
            PrimitiveType::Date => "date".into(),
            PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz
            | PrimitiveType::TimestampNs
            | PrimitiveType::TimestamptzNs => "timestamp".into(),
            PrimitiveType::Time | PrimitiveType::String | PrimitiveType::Uuid => "string".into(),
            PrimitiveType::Binary | PrimitiveType::Fixed(_) => "binary".into(),
            PrimitiveType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
        },
        Type::Struct(s) => {
            let fields: Vec<String> = s
                .fields()
                .iter()
                .map(|f| format!("{}:{}", f.name, hive_type(&f.field_type)))
                .collect();
            format!("struct<{}>", fields.join(","))
        }
        Type::List(l) => format!("array<{}>", hive_type(&l.element_field.field_type)),
        Type::Map(m) => format!(
            "map<{},{}>",
            hive_type(&m.key_field.field_type),
            hive_type(&m.value_field.field_type)
        ),
    }
}

fn column(f: &NestedFieldRef) -> Value {
    let mut c = json!({
        "Name": f.name,
        "Type": hive_type(&f.field_type),
        "Parameters": {
            "iceberg.field.id": f.id.to_string(),
            "iceberg.field.optional": (!f.required).to_string(),
            "iceberg.field.current": "true",
        },
    });
    // Glue takes comments of at most 255 characters.
    if let Some(doc) = f.doc.as_deref().filter(|d| !d.is_empty()) {
        c["Comment"] = json!(doc.chars().take(255).collect::<String>());
    }
    c
}

/// The `TableInput` of a Glue table whose current metadata is `metadata` at
/// `location`; an update keeps what other tools set on the table `previous` (its other
/// parameters, description, owner, retention), as Spark's and pyiceberg's Glue
/// catalogs do.
fn table_input(
    name: &str,
    location: &str,
    metadata: &TableMetadata,
    previous: Option<&GlueTable>,
) -> Value {
    let prev = previous.map(|p| &p.table);
    let mut params = prev
        .and_then(|t| t["Parameters"].as_object().cloned())
        .unwrap_or_default();
    params.insert(TABLE_TYPE.into(), json!(ICEBERG));
    params.insert(METADATA_LOCATION.into(), json!(location));
    match previous {
        Some(p) => params.insert(
            PREVIOUS_METADATA_LOCATION.into(),
            json!(p.metadata_location),
        ),
        None => params.remove(PREVIOUS_METADATA_LOCATION),
    };
    let columns: Vec<Value> = metadata
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(column)
        .collect();
    let mut input = json!({
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": params,
        "StorageDescriptor": {"Location": metadata.location(), "Columns": columns},
    });
    if let Some(t) = prev {
        for k in ["Description", "Owner", "Retention"] {
            if !t[k].is_null() {
                input[k] = t[k].clone();
            }
        }
    }
    if let Some(d) = metadata.properties().get("comment") {
        input["Description"] = json!(d);
    }
    input
}

#[async_trait]
impl Catalog for GlueCatalog {
    async fn list_namespaces(
        &self,
        _parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        self.unsupported("list databases")
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        let db = database_of(namespace)?;
        let mut input = json!({"Name": db});
        if !properties.is_empty() {
            input["Parameters"] = json!(properties);
        }
        match self
            .call("CreateDatabase", json!({"DatabaseInput": input}))
            .await
        {
            Ok(_) => Ok(Namespace::with_properties(namespace.clone(), properties)),
            Err(e) if code_of(&e) == Some("AlreadyExistsException") => Err(Error::new(
                ErrorKind::NamespaceAlreadyExists,
                format!("Glue database {db} exists"),
            )),
            Err(e) => Err(unexpected(e)),
        }
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        let db = database_of(namespace)?;
        match self.call("GetDatabase", json!({"Name": db})).await {
            Ok(v) => {
                let props = v["Database"]["Parameters"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(Namespace::with_properties(namespace.clone(), props))
            }
            Err(e) if code_of(&e) == Some("EntityNotFoundException") => Err(Error::new(
                ErrorKind::NamespaceNotFound,
                format!("no Glue database {db}"),
            )),
            Err(e) => Err(unexpected(e)),
        }
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        match self.get_namespace(namespace).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NamespaceNotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn update_namespace(
        &self,
        _namespace: &NamespaceIdent,
        _properties: HashMap<String, String>,
    ) -> Result<()> {
        self.unsupported("update databases")
    }

    async fn drop_namespace(&self, _namespace: &NamespaceIdent) -> Result<()> {
        self.unsupported("drop databases")
    }

    async fn list_tables(&self, _namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        self.unsupported("list tables")
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        let db = database_of(namespace)?;
        let id = TableIdent::new(namespace.clone(), creation.name.clone());
        let Some(location) = creation.location.clone() else {
            return Err(Error::new(
                ErrorKind::DataInvalid,
                "a Glue table is created at a location (output.uri)",
            ));
        };
        let metadata = TableMetadataBuilder::from_table_creation(creation)?
            .build()?
            .metadata;
        let at = MetadataLocation::new_with_metadata(location, &metadata);
        metadata.write_to(&self.file_io, &at).await?;
        let at = at.to_string();
        let input = table_input(id.name(), &at, &metadata, None);
        match self
            .call(
                "CreateTable",
                json!({"DatabaseName": db, "TableInput": input}),
            )
            .await
        {
            Ok(_) => self.table(&id, at, metadata),
            Err(e) if code_of(&e) == Some("AlreadyExistsException") => Err(Error::new(
                ErrorKind::TableAlreadyExists,
                format!("Glue table {db}.{} exists", id.name()),
            )),
            Err(e) if code_of(&e) == Some("EntityNotFoundException") => Err(Error::new(
                ErrorKind::NamespaceNotFound,
                format!("no Glue database {db}"),
            )),
            Err(e) => Err(unexpected(e)),
        }
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        let Some(t) = self.glue_table(table).await? else {
            return Err(Error::new(
                ErrorKind::TableNotFound,
                format!("no Glue table {table}"),
            ));
        };
        let metadata = TableMetadata::read_from(&self.file_io, &t.metadata_location).await?;
        self.table(table, t.metadata_location, metadata)
    }

    async fn drop_table(&self, _table: &TableIdent) -> Result<()> {
        self.unsupported("drop tables")
    }

    async fn purge_table(&self, _table: &TableIdent) -> Result<()> {
        self.unsupported("purge tables")
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        Ok(self.glue_table(table).await?.is_some())
    }

    async fn rename_table(&self, _src: &TableIdent, _dest: &TableIdent) -> Result<()> {
        self.unsupported("rename tables")
    }

    async fn register_table(
        &self,
        _table: &TableIdent,
        _metadata_location: String,
    ) -> Result<Table> {
        self.unsupported("register tables")
    }

    /// The commit: requirements checked against the table as Glue has it, the next
    /// metadata written, and `UpdateTable` at the `VersionId` read.
    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        self.update_table_on(commit, None).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{ListType, MapType, NestedField, StructType};
    use std::sync::Arc;

    #[test]
    fn hive_types_of_nested_iceberg_types() {
        let s = Type::Struct(StructType::new(vec![
            Arc::new(NestedField::required(
                1,
                "id",
                Type::Primitive(PrimitiveType::Long),
            )),
            Arc::new(NestedField::optional(
                2,
                "tags",
                Type::List(ListType::new(Arc::new(NestedField::list_element(
                    3,
                    Type::Primitive(PrimitiveType::String),
                    true,
                )))),
            )),
            Arc::new(NestedField::optional(
                4,
                "m",
                Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(
                        5,
                        Type::Primitive(PrimitiveType::String),
                    )),
                    Arc::new(NestedField::map_value_element(
                        6,
                        Type::Primitive(PrimitiveType::Decimal {
                            precision: 9,
                            scale: 2,
                        }),
                        false,
                    )),
                )),
            )),
        ]));
        assert_eq!(
            hive_type(&s),
            "struct<id:bigint,tags:array<string>,m:map<string,decimal(9,2)>>"
        );
    }

    #[test]
    fn only_transient_answers_are_asked_again() {
        let api = |status: Option<u16>, code: Option<&str>| AwsError::Api {
            api: "UpdateTable",
            url: "u".into(),
            status,
            code: code.map(str::to_string),
            message: "m".into(),
        };
        assert!(transient(&api(None, None)));
        assert!(transient(&api(Some(400), Some("ThrottlingException"))));
        assert!(transient(&api(Some(503), None)));
        assert!(!transient(&api(
            Some(400),
            Some("ConcurrentModificationException")
        )));
        assert!(!transient(&api(Some(400), Some("EntityNotFoundException"))));
        assert!(!transient(&AwsError::Environment("no region".into())));
    }
}
