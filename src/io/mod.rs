//! Records in and out of object storage: [`read`] turns input files into Arrow
//! batches (one [`read::Reader`] per input format), [`write`] stages a task attempt's
//! batches as files and commits datasets at job end (one [`write::Writer`] per output
//! format), [`download`] fetches the images of URL inputs. Nothing here knows about
//! leases, tasks or operators: the worker drives readers and writers, the coordinator
//! asks readers how to plan.
pub mod download;
pub mod read;
pub mod write;
