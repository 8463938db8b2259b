output "job_root" {
  description = "mdf submit --job-root"
  value       = "s3://${module.storage.bucket}/mdf"
}

output "output_prefix" {
  description = "Where curated datasets go (--output s3://.../clean/NAME)."
  value       = "s3://${module.storage.bucket}/clean"
}

output "cpu_queue" {
  description = "mdf submit --queue"
  value       = module.batch.job_queues["cpu"]
}

output "gpu_queue" {
  description = "mdf submit --gpu-queue"
  value       = module.batch.job_queues["gpu"]
}

output "job_definitions" {
  description = "mdf submit --job-definition / --gpu-job-definition"
  value       = module.batch.job_definitions
}

output "repositories" {
  description = "docker push targets"
  value       = module.registry.repository_urls
}

output "log_group" {
  description = "Worker logs"
  value       = module.batch.log_group
}

output "submit_command" {
  description = "A ready submit command for the CommonCrawl example."
  value       = "mdf submit examples/commoncrawl.yaml --job-root s3://${module.storage.bucket}/mdf --output s3://${module.storage.bucket}/clean/cc --backend aws-batch --queue ${module.batch.job_queues["cpu"]} --workers 64"
}

output "fleet_groups" {
  description = "mdf submit --backend fleet --group / --gpu-group"
  value       = { for k, f in module.fleet : k => f.group_name }
}

output "fleet_submit_command" {
  description = "A ready fleet submit command for the CommonCrawl example."
  value       = "mdf submit examples/commoncrawl.yaml --job-root s3://${module.storage.bucket}/mdf --output s3://${module.storage.bucket}/clean/cc --backend fleet --group ${var.name}-cpu --workers 32"
}
