output "batch_service_role_arn" {
  description = "AWS Batch service role."
  value       = aws_iam_role.batch_service.arn
}

output "instance_profile_arn" {
  description = "Instance profile of the compute environments."
  value       = aws_iam_instance_profile.instance.arn
}

output "execution_role_arn" {
  description = "Task execution role (image pulls, logs)."
  value       = aws_iam_role.execution.arn
}

output "job_role_arn" {
  description = "Role the mdf worker runs as."
  value       = aws_iam_role.job.arn
}

output "fleet_instance_profile_arn" {
  description = "Instance profile of fleet workers (fleet module)."
  value       = aws_iam_instance_profile.fleet.arn
}
