output "job_queues" {
  description = "Job queue name by worker class: mdf submit --queue / --gpu-queue."
  value       = { for k, q in aws_batch_job_queue.workers : k => q.name }
}

output "job_definitions" {
  description = "Job definition name by worker class: mdf submit --job-definition / --gpu-job-definition."
  value       = { for k, d in aws_batch_job_definition.worker : k => d.name }
}

output "log_group" {
  description = "CloudWatch log group of the workers."
  value       = aws_cloudwatch_log_group.workers.name
}
