//! `output.format: iceberg` (docs/PROTOCOL.md §6, "Iceberg"). Tasks write Parquet
//! exactly as `format: parquet` does; finalize publishes the files to
//! `<output>/data/` and then appends them to the table in one fast-append snapshot
//! whose summary names the job (`mdf.job-uri`). A finalize retried after its commit
//! landed finds that snapshot and appends nothing: one job, one snapshot. The table is
//! created at `<output>` on first use, with a name mapping (our Parquet files carry no
//! field ids); appending to an existing table checks its schema first, at submit.
//! Catalogs: SQL over SQLite (pyiceberg's `SqlCatalog` tables), REST, and AWS Glue
//! ([`super::iceberg_glue`]). Metadata and
//! manifests move through our object stores ([`MdfStorage`]), so the table may live
//! wherever mdf writes (local, S3), with one S3 client.
use super::iceberg_glue::GlueCatalog;
use super::{CommitCtx, Sink, WriteCtx, WriteError, Writer};
use crate::spec::{IcebergCatalogKind, IcebergSpec};
use crate::store::{Registry, Uri};
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig,
    StorageFactory,
};
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, MappedField, NameMapping, NestedFieldRef,
    Schema as IceSchema, Type,
};
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation, TableIdent};
use object_store::ObjectStoreExt;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// The snapshot summary key naming the job that appended it.
pub const JOB_KEY: &str = "mdf.job-uri";
const NAME_MAPPING: &str = "schema.name-mapping.default";

fn ice_err(e: impl std::fmt::Display) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string())
}

fn fresh_registry() -> Registry {
    Registry::new(Default::default())
}

/// Iceberg's file I/O over our object stores: every URI mdf reads and writes
/// (`file://`, `s3://`, `memory://`), request-counted like everything else.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MdfStorage {
    #[serde(skip, default = "fresh_registry")]
    reg: Registry,
}

impl MdfStorage {
    fn open(&self, path: &str) -> iceberg::Result<(Arc<dyn object_store::ObjectStore>, Uri)> {
        self.reg.resolve(path).map_err(ice_err)
    }
}

struct Reader {
    store: Arc<dyn object_store::ObjectStore>,
    path: object_store::path::Path,
}

#[async_trait]
impl FileRead for Reader {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        self.store
            .get_range(&self.path, range)
            .await
            .map_err(ice_err)
    }
}

/// Metadata files are small: buffered, then put whole.
struct Writer_ {
    store: Arc<dyn object_store::ObjectStore>,
    path: object_store::path::Path,
    buf: Vec<u8>,
}

#[async_trait]
impl FileWrite for Writer_ {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.buf.extend_from_slice(&bs);
        Ok(())
    }
    async fn close(&mut self) -> iceberg::Result<()> {
        let body = std::mem::take(&mut self.buf);
        self.store
            .put(&self.path, body.into())
            .await
            .map(|_| ())
            .map_err(ice_err)
    }
}

#[async_trait]
#[typetag::serde(name = "mdf")]
impl Storage for MdfStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        let (s, u) = self.open(path)?;
        match s.head(&u.path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(ice_err(e)),
        }
    }
    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        let (s, u) = self.open(path)?;
        let m = s.head(&u.path).await.map_err(ice_err)?;
        Ok(FileMetadata { size: m.size })
    }
    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        let (s, u) = self.open(path)?;
        s.get(&u.path)
            .await
            .map_err(ice_err)?
            .bytes()
            .await
            .map_err(ice_err)
    }
    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        let (store, u) = self.open(path)?;
        Ok(Box::new(Reader {
            store,
            path: u.path,
        }))
    }
    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        let (s, u) = self.open(path)?;
        s.put(&u.path, bs.into()).await.map(|_| ()).map_err(ice_err)
    }
    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        let (store, u) = self.open(path)?;
        Ok(Box::new(Writer_ {
            store,
            path: u.path,
            buf: vec![],
        }))
    }
    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        let (s, u) = self.open(path)?;
        match s.delete(&u.path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(ice_err(e)),
        }
    }
    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let (s, u) = self.open(path)?;
        let found: Vec<_> = s
            .list(Some(&u.path))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(ice_err)?;
        for p in found {
            match s.delete(&p).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(ice_err(e)),
            }
        }
        Ok(())
    }
    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        while let Some(p) = paths.next().await {
            self.delete(&p).await?;
        }
        Ok(())
    }
    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }
    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// Hands catalogs an [`MdfStorage`] on the job's registry.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct MdfStorageFactory {
    #[serde(skip, default = "fresh_registry")]
    reg: Registry,
}

#[typetag::serde(name = "mdf")]
impl StorageFactory for MdfStorageFactory {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(MdfStorage {
            reg: self.reg.clone(),
        }))
    }
}

/// The catalog `spec` names, its files moved through `reg`.
pub async fn catalog(spec: &IcebergSpec, reg: &Registry) -> Result<Arc<dyn Catalog>, String> {
    Ok(open_catalog(spec, reg).await?.0)
}

/// [`catalog`], and the same catalog as a [`GlueCatalog`] when it is one (its commit
/// can be pinned to the metadata a round checked).
async fn open_catalog(
    spec: &IcebergSpec,
    reg: &Registry,
) -> Result<(Arc<dyn Catalog>, Option<Arc<GlueCatalog>>), String> {
    let factory: Arc<dyn StorageFactory> = Arc::new(MdfStorageFactory { reg: reg.clone() });
    let mut props: HashMap<String, String> = spec.properties.clone().into_iter().collect();
    if let Some(w) = &spec.warehouse {
        props.insert("warehouse".into(), w.clone());
    }
    // Credentials from the environment only: the spec is stored with the job.
    for (var, key) in [
        ("MDF_ICEBERG_TOKEN", "token"),
        ("MDF_ICEBERG_CREDENTIAL", "credential"),
    ] {
        if let Ok(v) = std::env::var(var)
            && !v.is_empty()
        {
            props.insert(key.into(), v);
        }
    }
    let what = |e: iceberg::Error| format!("the {:?} catalog at {}: {e}", spec.catalog, spec.uri);
    match spec.catalog {
        IcebergCatalogKind::Sql => {
            // Created when missing; the file is pyiceberg's SqlCatalog's too.
            let path = spec.uri.strip_prefix("sqlite://").unwrap_or(&spec.uri);
            if let Some(dir) = std::path::Path::new(path).parent() {
                std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            props.insert("uri".into(), format!("sqlite://{path}?mode=rwc"));
            props
                .entry("warehouse".into())
                .or_insert_with(|| format!("file://{}", path.rsplit_once('/').map_or("", |x| x.0)));
            let c = iceberg_catalog_sql::SqlCatalogBuilder::default()
                .sql_bind_style(iceberg_catalog_sql::SqlBindStyle::QMark)
                .with_storage_factory(factory)
                .load(&spec.name, props)
                .await
                .map_err(what)?;
            Ok((Arc::new(c), None))
        }
        IcebergCatalogKind::Rest => {
            props.insert("uri".into(), spec.uri.clone());
            let c = iceberg_catalog_rest::RestCatalogBuilder::default()
                .with_storage_factory(factory)
                .load(&spec.name, props)
                .await
                .map_err(what)?;
            Ok((Arc::new(c), None))
        }
        IcebergCatalogKind::Glue => {
            let file_io = iceberg::io::FileIOBuilder::new(factory).build();
            let c = Arc::new(GlueCatalog::new(
                spec.region.clone(),
                &spec.uri,
                spec.catalog_id.clone(),
                file_io,
            )?);
            Ok((c.clone(), Some(c)))
        }
    }
}

fn ident(spec: &IcebergSpec) -> Result<(NamespaceIdent, TableIdent), String> {
    let ns = NamespaceIdent::from_strs(&spec.namespace).map_err(|e| e.to_string())?;
    Ok((ns.clone(), TableIdent::new(ns, spec.table.clone())))
}

/// Iceberg has no unsigned integers: the type a column is stored as in the table
/// (UInt8/16 → int, UInt32/64 → long; a UInt64 above 2^63 − 1 fails its batch).
fn signed(t: &arrow_schema::DataType) -> arrow_schema::DataType {
    use arrow_schema::DataType as D;
    match t {
        D::UInt8 | D::UInt16 => D::Int32,
        D::UInt32 | D::UInt64 => D::Int64,
        other => other.clone(),
    }
}

/// The output schema as the table stores it ([`signed`] integers, no field metadata:
/// a Parquet reader's field ids would otherwise be taken as given).
pub fn table_schema(schema: &arrow_schema::Schema) -> arrow_schema::Schema {
    arrow_schema::Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| {
                f.as_ref()
                    .clone()
                    .with_data_type(signed(f.data_type()))
                    .with_metadata(Default::default())
            })
            .collect::<Vec<_>>(),
    )
}

/// The Iceberg schema of the output (field ids assigned in order).
fn ice_schema(schema: &arrow_schema::Schema) -> Result<IceSchema, String> {
    iceberg::arrow::arrow_schema_to_schema_auto_assign_ids(&table_schema(schema))
        .map_err(|e| e.to_string())
}

/// The Parquet writer, its batches cast to [`table_schema`].
struct Signed {
    inner: Box<dyn Sink>,
    schema: arrow_schema::SchemaRef,
}

impl Sink for Signed {
    fn write(&mut self, batch: &arrow_array::RecordBatch) -> Result<(), WriteError> {
        let bad = |e: arrow_schema::ArrowError| WriteError::Invalid {
            uri: "iceberg output".into(),
            message: format!("a value does not fit the table's signed column: {e}"),
        };
        let opts = arrow_cast::CastOptions {
            safe: false,
            ..Default::default()
        };
        let cols = batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    Ok(c.clone())
                } else {
                    arrow_cast::cast_with_options(c, f.data_type(), &opts)
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        let b = arrow_array::RecordBatch::try_new(self.schema.clone(), cols).map_err(bad)?;
        self.inner.write(&b)
    }
    fn finish(self: Box<Self>) -> Result<Vec<crate::protocol::records::OutputFile>, WriteError> {
        self.inner.finish()
    }
    fn abort(self: Box<Self>) {
        self.inner.abort()
    }
}

/// Why the output cannot be appended to `table` (names and types must match, in any
/// order; a required column of the table must be in the output), or `None`.
fn schema_mismatch(table: &IceSchema, ours: &IceSchema) -> Option<String> {
    let mut diffs = Vec::new();
    for f in ours.as_struct().fields() {
        match table.field_by_name(&f.name) {
            None => diffs.push(format!("column {:?} is not in the table", f.name)),
            Some(t) if !same_type(&t.field_type, &f.field_type) => diffs.push(format!(
                "column {:?} is {} in the table, {} in the output",
                f.name, t.field_type, f.field_type
            )),
            Some(t) if t.required && !f.required => diffs.push(format!(
                "column {:?} is required in the table and may be null in the output",
                f.name
            )),
            _ => {}
        }
    }
    for t in table.as_struct().fields() {
        if t.required && ours.field_by_name(&t.name).is_none() {
            diffs.push(format!(
                "the table's required column {:?} is not in the output",
                t.name
            ));
        }
    }
    (!diffs.is_empty()).then(|| diffs.join("; "))
}

/// Types equal up to field ids and optionality.
fn same_type(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (Type::Primitive(x), Type::Primitive(y)) => x == y,
        (Type::Struct(x), Type::Struct(y)) => {
            x.fields().len() == y.fields().len()
                && x.fields()
                    .iter()
                    .zip(y.fields())
                    .all(|(p, q)| p.name == q.name && same_type(&p.field_type, &q.field_type))
        }
        (Type::List(x), Type::List(y)) => {
            same_type(&x.element_field.field_type, &y.element_field.field_type)
        }
        (Type::Map(x), Type::Map(y)) => {
            same_type(&x.key_field.field_type, &y.key_field.field_type)
                && same_type(&x.value_field.field_type, &y.value_field.field_type)
        }
        _ => false,
    }
}

/// Column names → field ids of `schema`, as readers resolve files without ids.
fn name_mapping(schema: &IceSchema) -> String {
    fn field(f: &NestedFieldRef) -> MappedField {
        let children: Vec<MappedField> = match f.field_type.as_ref() {
            Type::Struct(s) => s.fields().iter().map(field).collect(),
            Type::List(l) => vec![field(&l.element_field)],
            Type::Map(m) => vec![field(&m.key_field), field(&m.value_field)],
            Type::Primitive(_) => vec![],
        };
        MappedField::new(Some(f.id), vec![f.name.clone()], children)
    }
    let m = NameMapping::new(schema.as_struct().fields().iter().map(field).collect());
    serde_json::to_string(&m).expect("a name mapping serialises")
}

/// At submit: the catalog answers, and an existing table takes the output's schema
/// (and is not partitioned: our files carry no partition values).
pub async fn check(
    spec: &IcebergSpec,
    reg: &Registry,
    schema: &arrow_schema::Schema,
) -> Result<(), String> {
    let cat = catalog(spec, reg).await?;
    let (_, id) = ident(spec)?;
    let ours = ice_schema(schema)?;
    if cat.table_exists(&id).await.map_err(|e| e.to_string())? {
        let t = cat.load_table(&id).await.map_err(|e| e.to_string())?;
        let md = t.metadata();
        if let Some(why) = schema_mismatch(md.current_schema(), &ours) {
            return Err(format!("table {} has another schema: {why}", id_name(spec)));
        }
        if !md.default_partition_spec().is_unpartitioned() {
            return Err(format!(
                "table {} is partitioned; mdf appends to unpartitioned tables only",
                id_name(spec)
            ));
        }
    }
    Ok(())
}

fn id_name(spec: &IcebergSpec) -> String {
    format!("{}.{}", spec.namespace.join("."), spec.table)
}

/// The finalize commit: the published data files appended as one snapshot, unless a
/// snapshot of this job is already there. Returns the snapshot id.
pub async fn commit(ctx: &CommitCtx<'_>, spec: &IcebergSpec) -> Result<Option<u64>, WriteError> {
    let fail = |m: String| WriteError::Commit {
        format: "Iceberg",
        uri: id_name(spec),
        message: m,
    };
    let (cat, glue) = open_catalog(spec, ctx.registry).await.map_err(fail)?;
    let (ns, id) = ident(spec).map_err(fail)?;
    let ours = ice_schema(ctx.schema).map_err(fail)?;
    let exists = cat
        .namespace_exists(&ns)
        .await
        .map_err(|e| fail(e.to_string()))?;
    // Created meanwhile by another job is as good.
    if !exists
        && let Err(e) = cat.create_namespace(&ns, HashMap::new()).await
        && !cat.namespace_exists(&ns).await.unwrap_or(false)
    {
        return Err(fail(format!("creating namespace: {e}")));
    }
    let table = if cat
        .table_exists(&id)
        .await
        .map_err(|e| fail(e.to_string()))?
    {
        cat.load_table(&id).await.map_err(|e| fail(e.to_string()))?
    } else {
        let creation = TableCreation::builder()
            .name(spec.table.clone())
            .location(ctx.output.to_uri_string())
            .schema(ours.clone())
            .properties([
                (NAME_MAPPING.to_string(), name_mapping(&ours)),
                ("write.format.default".to_string(), "parquet".to_string()),
            ])
            .build();
        match cat.create_table(&ns, creation).await {
            Ok(t) => t,
            // Created meanwhile (another job, or this finalize's earlier attempt).
            Err(e) => cat
                .load_table(&id)
                .await
                .map_err(|_| fail(format!("creating the table: {e}")))?,
        }
    };
    drop(table);
    // Each round: the table as the catalog has it now; this job's snapshot there means
    // an earlier attempt's commit landed. Otherwise one append onto exactly that base:
    // the catalog's compare-and-swap refuses it if anything committed meanwhile (a
    // zombie attempt of this finalize included), and the next round looks again.
    const ROUNDS: usize = 10;
    for round in 1..=ROUNDS {
        let table = cat.load_table(&id).await.map_err(|e| fail(e.to_string()))?;
        let md = table.metadata();
        if let Some(s) = md.snapshots().find(|s| {
            s.summary()
                .additional_properties
                .get(JOB_KEY)
                .map(String::as_str)
                == Some(ctx.job_uri)
        }) {
            return Ok(Some(s.snapshot_id() as u64));
        }
        if let Some(why) = schema_mismatch(md.current_schema(), &ours) {
            return Err(fail(format!(
                "the table's schema changed since submit: {why}"
            )));
        }
        if !md.default_partition_spec().is_unpartitioned() {
            return Err(fail(
                "the table is partitioned now (it was replaced since submit); mdf appends to unpartitioned tables only".into(),
            ));
        }
        if ctx.published.is_empty() {
            return Ok(None);
        }
        let spec_id = md.default_partition_spec_id();
        let mut files = Vec::new();
        for p in &ctx.published {
            files.push(
                DataFileBuilder::default()
                    .content(DataContentType::Data)
                    .file_path(p.uri.clone())
                    .file_format(DataFileFormat::Parquet)
                    .record_count(p.rows)
                    .file_size_in_bytes(p.bytes)
                    .partition_spec_id(spec_id)
                    .build()
                    .map_err(|e| fail(e.to_string()))?,
            );
        }
        let mut props = HashMap::new();
        props.insert(JOB_KEY.to_string(), ctx.job_uri.to_string());
        let tx = Transaction::new(&table);
        let mut tx = tx
            .fast_append()
            .add_data_files(files)
            .set_snapshot_properties(props)
            .apply(tx)
            .map_err(|e| fail(e.to_string()))?;
        if !md.properties().contains_key(NAME_MAPPING) {
            tx = tx
                .update_table_properties()
                .set(NAME_MAPPING.to_string(), name_mapping(md.current_schema()))
                .apply(tx)
                .map_err(|e| fail(e.to_string()))?;
        }
        // The transaction re-reads the table before it commits and would re-apply the
        // append onto a newer base, after this round's check: it gets this base.
        let pinned = PinnedBase {
            inner: cat.clone(),
            glue: glue.clone(),
            table: table.clone(),
        };
        match tx.commit(&pinned).await {
            Ok(after) => {
                // Tests: the process dies between the catalog commit and the manifest.
                crate::store::fault::abort_point("iceberg-committed");
                return Ok(after
                    .metadata()
                    .current_snapshot()
                    .map(|s| s.snapshot_id() as u64));
            }
            Err(e) if round < ROUNDS => {
                tracing::warn!(table = %id_name(spec), error = %e, round, "Iceberg commit refused; reading the table again");
            }
            Err(e) => return Err(fail(e.to_string())),
        }
    }
    unreachable!("the last round returns")
}

/// A catalog whose `load_table` of one table answers a fixed base: a transaction
/// commits onto the table this job checked, or not at all.
#[derive(Debug)]
struct PinnedBase {
    inner: Arc<dyn Catalog>,
    /// Glue's commit also refuses a table whose metadata moved on from this base
    /// (another engine's schema change, say), not only a new snapshot.
    glue: Option<Arc<GlueCatalog>>,
    table: iceberg::table::Table,
}

#[async_trait]
impl Catalog for PinnedBase {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> iceberg::Result<Vec<NamespaceIdent>> {
        self.inner.list_namespaces(parent).await
    }
    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> iceberg::Result<iceberg::Namespace> {
        self.inner.create_namespace(namespace, properties).await
    }
    async fn get_namespace(
        &self,
        namespace: &NamespaceIdent,
    ) -> iceberg::Result<iceberg::Namespace> {
        self.inner.get_namespace(namespace).await
    }
    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> iceberg::Result<bool> {
        self.inner.namespace_exists(namespace).await
    }
    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> iceberg::Result<()> {
        self.inner.update_namespace(namespace, properties).await
    }
    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> iceberg::Result<()> {
        self.inner.drop_namespace(namespace).await
    }
    async fn list_tables(&self, namespace: &NamespaceIdent) -> iceberg::Result<Vec<TableIdent>> {
        self.inner.list_tables(namespace).await
    }
    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> iceberg::Result<iceberg::table::Table> {
        self.inner.create_table(namespace, creation).await
    }
    async fn load_table(&self, table: &TableIdent) -> iceberg::Result<iceberg::table::Table> {
        if table == self.table.identifier() {
            return Ok(self.table.clone());
        }
        self.inner.load_table(table).await
    }
    async fn drop_table(&self, table: &TableIdent) -> iceberg::Result<()> {
        self.inner.drop_table(table).await
    }
    async fn purge_table(&self, table: &TableIdent) -> iceberg::Result<()> {
        self.inner.purge_table(table).await
    }
    async fn table_exists(&self, table: &TableIdent) -> iceberg::Result<bool> {
        self.inner.table_exists(table).await
    }
    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> iceberg::Result<()> {
        self.inner.rename_table(src, dest).await
    }
    async fn register_table(
        &self,
        table: &TableIdent,
        metadata_location: String,
    ) -> iceberg::Result<iceberg::table::Table> {
        self.inner.register_table(table, metadata_location).await
    }
    async fn update_table(
        &self,
        commit: iceberg::TableCommit,
    ) -> iceberg::Result<iceberg::table::Table> {
        match &self.glue {
            Some(g) => {
                g.update_table_on(commit, self.table.metadata_location())
                    .await
            }
            None => self.inner.update_table(commit).await,
        }
    }
}

/// `output.format: iceberg`: Parquet files, one snapshot appended at the end.
pub struct Iceberg;

#[async_trait]
impl Writer for Iceberg {
    fn name(&self) -> &'static str {
        "iceberg"
    }
    fn open(&self, mut ctx: WriteCtx) -> Result<Box<dyn Sink>, WriteError> {
        let schema = Arc::new(table_schema(&ctx.schema));
        ctx.schema = schema.clone();
        Ok(Box::new(Signed {
            inner: super::parquet::Parquet.open(ctx)?,
            schema,
        }))
    }
    fn published_name(&self, task: &str, n: usize, staged: &str) -> Option<String> {
        super::parquet::Parquet
            .published_name(task, n, staged)
            .map(|p| format!("data/{p}"))
    }
    /// The table's metadata is the catalog's: finalize lists `data/` only and
    /// never sweeps the table's location.
    fn dataset_dir(&self) -> Option<&'static str> {
        Some("data")
    }
    async fn check(
        &self,
        output: &crate::spec::OutputSpec,
        reg: &Registry,
        schema: &arrow_schema::Schema,
    ) -> Result<(), String> {
        match &output.iceberg {
            Some(spec) => check(spec, reg, schema).await,
            None => Err("output.iceberg is missing".into()),
        }
    }
    async fn commit(&self, ctx: CommitCtx<'_>) -> Result<Option<u64>, WriteError> {
        let spec = ctx.iceberg.ok_or(WriteError::Commit {
            format: "Iceberg",
            uri: ctx.output.to_uri_string(),
            message: "output.iceberg is missing".into(),
        })?;
        commit(&ctx, spec).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field, Schema};

    /// The zombie of a finalize: its append built on the table as it was before the
    /// other attempt's snapshot landed. Through the pinned base the catalog refuses
    /// it; a plain transaction would have re-read the table and appended twice.
    #[tokio::test]
    async fn an_append_onto_a_stale_base_is_refused_not_repeated() {
        let d = tempfile::tempdir().unwrap();
        let spec = IcebergSpec {
            catalog: IcebergCatalogKind::Sql,
            uri: format!("sqlite://{}/c.db", d.path().display()),
            name: "mdf".into(),
            warehouse: None,
            namespace: vec!["ns".into()],
            table: "t".into(),
            properties: Default::default(),
            region: None,
            catalog_id: None,
        };
        let reg = fresh_registry();
        let cat = catalog(&spec, &reg).await.unwrap();
        stale_base_is_refused(cat, None, "ns", format!("file://{}/t", d.path().display())).await;
    }

    /// The same against moto's Glue, when the tests' S3 server is there (.ci/run starts it and requires it). moto ignores Glue's
    /// `VersionId`: the refusal here is the commit's requirements checked against the
    /// table as Glue has it at commit time.
    #[tokio::test]
    async fn an_append_onto_a_stale_glue_base_is_refused_not_repeated() {
        let Ok(ep) = std::env::var("MDF_TEST_S3_ENDPOINT") else {
            assert!(
                std::env::var_os("MDF_REQUIRE_S3").is_none(),
                "MDF_REQUIRE_S3 is set but MDF_TEST_S3_ENDPOINT is not"
            );
            return;
        };
        // The table's files in memory: what is under test is Glue's side.
        let reg = fresh_registry();
        let creds = Arc::new(object_store::StaticCredentialProvider::new(
            object_store::aws::AwsCredential {
                key_id: "test".into(),
                secret_key: "test".into(),
                token: None,
            },
        ));
        let api = crate::store::aws::AwsClient::from_parts(
            &super::super::iceberg_glue::GLUE,
            "us-east-1".into(),
            ep,
            creds,
        )
        .unwrap();
        let factory: Arc<dyn StorageFactory> = Arc::new(MdfStorageFactory { reg });
        let file_io = iceberg::io::FileIOBuilder::new(factory).build();
        let glue = Arc::new(GlueCatalog::with_client(api, None, file_io).unwrap());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let db = format!("stale_{}_{nanos}", std::process::id());
        stale_base_is_refused(
            glue.clone(),
            Some(glue.clone()),
            &db,
            format!("memory://{db}/t"),
        )
        .await;
        // Another engine changes the table without a snapshot (a property here): an
        // append pinned to the metadata before it is refused too.
        let id = TableIdent::new(NamespaceIdent::new(db.clone()), "t".into());
        let before = glue.load_table(&id).await.unwrap();
        let tx = Transaction::new(&before);
        tx.update_table_properties()
            .set("owner".into(), "someone-else".into())
            .apply(tx)
            .unwrap()
            .commit(glue.as_ref())
            .await
            .unwrap();
        let tx = Transaction::new(&before);
        let tx = tx
            .update_table_properties()
            .set("mdf".into(), "x".into())
            .apply(tx)
            .unwrap();
        let pinned = PinnedBase {
            inner: glue.clone(),
            glue: Some(glue.clone()),
            table: before.clone(),
        };
        let e = tx.commit(&pinned).await.unwrap_err();
        assert!(e.to_string().contains("moved on"), "{e}");
        let now = glue.load_table(&id).await.unwrap();
        assert!(!now.metadata().properties().contains_key("mdf"));
    }

    async fn stale_base_is_refused(
        cat: Arc<dyn Catalog>,
        glue: Option<Arc<GlueCatalog>>,
        ns: &str,
        location: String,
    ) {
        let ns = NamespaceIdent::new(ns.into());
        let id = TableIdent::new(ns.clone(), "t".into());
        cat.create_namespace(&ns, HashMap::new()).await.unwrap();
        let schema =
            ice_schema(&Schema::new(vec![Field::new("id", DataType::Utf8, false)])).unwrap();
        let creation = TableCreation::builder()
            .name("t".into())
            .location(location.clone())
            .schema(schema)
            .build();
        let stale = cat.create_table(&ns, creation).await.unwrap();
        let file = |n: &str| {
            DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_path(format!("{location}/data/{n}.parquet"))
                .file_format(DataFileFormat::Parquet)
                .record_count(1)
                .file_size_in_bytes(100)
                .partition_spec_id(0)
                .build()
                .unwrap()
        };
        let append = |t: &iceberg::table::Table, n: &str| {
            let tx = Transaction::new(t);
            tx.fast_append()
                .add_data_files([file(n)])
                .apply(tx)
                .unwrap()
        };
        // The live attempt commits.
        append(&stale, "a").commit(cat.as_ref()).await.unwrap();
        // The zombie, on the base it had checked, is refused.
        let pinned = PinnedBase {
            inner: cat.clone(),
            glue,
            table: stale.clone(),
        };
        assert!(append(&stale, "b").commit(&pinned).await.is_err());
        assert_eq!(
            cat.load_table(&id)
                .await
                .unwrap()
                .metadata()
                .snapshots()
                .count(),
            1
        );
        // Without the pin the transaction re-bases and appends again.
        append(&stale, "c").commit(cat.as_ref()).await.unwrap();
        assert_eq!(
            cat.load_table(&id)
                .await
                .unwrap()
                .metadata()
                .snapshots()
                .count(),
            2
        );
    }

    #[test]
    fn schemas_compare_by_name_and_type() {
        let a = ice_schema(&Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, true),
        ]))
        .unwrap();
        let reordered = ice_schema(&Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("id", DataType::Utf8, false),
        ]))
        .unwrap();
        assert_eq!(schema_mismatch(&a, &reordered), None);
        let nullable = ice_schema(&Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ]))
        .unwrap();
        assert!(
            schema_mismatch(&a, &nullable)
                .unwrap()
                .contains("may be null")
        );
        let other = ice_schema(&Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("n", DataType::Utf8, true),
        ]))
        .unwrap();
        assert!(schema_mismatch(&a, &other).unwrap().contains("\"n\""));
        let missing =
            ice_schema(&Schema::new(vec![Field::new("n", DataType::Int64, true)])).unwrap();
        assert!(schema_mismatch(&a, &missing).unwrap().contains("required"));
        let m: serde_json::Value = serde_json::from_str(&name_mapping(&a)).unwrap();
        assert_eq!(m[0]["names"][0], "id");
        assert_eq!(m[0]["field-id"], 1);
    }
}
